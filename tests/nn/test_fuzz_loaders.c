/* test_fuzz_loaders.c - the file loaders against mutated files: tc_idx_load
 * (raw and gzip), tc_mnist_load and tc_safe_load read thousands of
 * deterministic mutants of valid files (bit flips, interesting bytes,
 * truncations, appended and removed runs, changed digits of the
 * safetensors header, a rewritten header length). Each call must either
 * succeed with a tensor that is what the file says, or fail with a loader's
 * status (TC_ERR_IO, TC_ERR_SHAPE, TC_ERR_DTYPE, TC_ERR_INVALID, TC_ERR_MEMORY)
 * and a message naming the call; never crash, hang, read out of bounds or
 * leak (the test command runs it under ASan + UBSan). A failed
 * tc_safe_load must leave its targets as they were.
 * TC_FUZZ_ITERS scales the mutants per seed (default 1500; the CI runs the
 * default, about 10,000 loads in all). Public API only. */
#include "nn_helpers.h"

#include <stdint.h>

/* a scratch directory in memory where the machine has /dev/shm (a mutant
 * is a file written and read back: on this VM's disk, 30 s for the set
 * against 4 s in tmpfs), else make_tmpdir's */
static void fuzz_dir(char *dir, size_t cap) {
    if (access("/dev/shm", W_OK) == 0) {
        snprintf(dir, cap, "/dev/shm/tc_fuzz_XXXXXX");
        if (mkdtemp(dir)) return;
    }
    make_tmpdir(dir, cap);
}

/* splitmix64: the mutation stream (deterministic per seed) */
static uint64_t next(uint64_t *s) {
    uint64_t z = (*s += 0x9E3779B97F4A7C15ULL);
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ULL;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBULL;
    return z ^ (z >> 31);
}

static size_t below(uint64_t *s, size_t n) {
    return n ? (size_t)(next(s) % n) : 0;
}

static int iters(void) {
    const char *e = getenv("TC_FUZZ_ITERS");
    int n = e && *e ? atoi(e) : 1500;
    return n > 0 ? n : 1500;
}

/* a mutant of seed (n bytes) into out (capacity n + 64); its length. Each
 * draw of the stream is a statement of its own: C leaves the order of two
 * calls in one expression open, and the mutants must not depend on it. */
static size_t mutate(const unsigned char *seed, size_t n, unsigned char *out, uint64_t *rs) {
    static const unsigned char interesting[] = {0, 1, 0x7f, 0x80, 0xff, '0', '9', '"', ',', '}'};
    memcpy(out, seed, n);
    size_t len = n;
    int ops = 1 + (int)below(rs, 3);
    for (int k = 0; k < ops; k++) {
        switch (below(rs, 7)) {
        case 0: { /* a bit flipped */
            size_t at = below(rs, len), bit = below(rs, 8);
            if (len) out[at] ^= (unsigned char)(1u << bit);
            break;
        }
        case 1: { /* an interesting byte */
            size_t at = below(rs, len), which = below(rs, sizeof interesting);
            if (len) out[at] = interesting[which];
            break;
        }
        case 2: /* truncated */
            len = below(rs, len + 1);
            break;
        case 3: { /* random bytes appended */
            size_t add = 1 + below(rs, 16);
            if (len + add > n + 64) add = n + 64 - len;
            for (size_t i = 0; i < add; i++) out[len++] = (unsigned char)next(rs);
            break;
        }
        case 4: { /* a run removed */
            if (!len) break;
            size_t at = below(rs, len);
            size_t cut = 1 + below(rs, 8);
            if (cut > len - at) cut = len - at;
            memmove(out + at, out + at + cut, len - at - cut);
            len -= cut;
            break;
        }
        case 5: { /* a digit changed (the numbers of a JSON header) */
            for (int tries = 0; tries < 32 && len; tries++) {
                size_t at = below(rs, len);
                if (out[at] >= '0' && out[at] <= '9') {
                    out[at] = (unsigned char)('0' + below(rs, 10));
                    break;
                }
            }
            break;
        }
        default: /* a 4-byte field overwritten (IDX sizes, the header length) */
            if (len >= 4) {
                size_t at = below(rs, len - 3) & ~(size_t)3;
                uint32_t v = (uint32_t)next(rs);
                v >>= below(rs, 32);
                memcpy(out + at, &v, 4);
            }
        }
    }
    return len;
}

/* writes n bytes to path */
static void put(const char *path, const unsigned char *b, size_t n) {
    FILE *f = fopen(path, "wb");
    assert_non_null(f);
    assert_int_equal(fwrite(b, 1, n, f), n);
    assert_int_equal(fclose(f), 0);
}

/* the whole file at path (malloc'ed), its length in *n */
static unsigned char *slurp(const char *path, size_t *n) {
    FILE *f = fopen(path, "rb");
    assert_non_null(f);
    assert_int_equal(fseek(f, 0, SEEK_END), 0);
    long len = ftell(f);
    assert_true(len > 0);
    rewind(f);
    unsigned char *b = malloc((size_t)len);
    assert_non_null(b);
    assert_int_equal(fread(b, 1, (size_t)len, f), (size_t)len);
    fclose(f);
    *n = (size_t)len;
    return b;
}

/* a failed load: one of the loaders' statuses and a message naming api */
static void check_failure(tc_status st, const char *api, size_t i) {
    bool known = st == TC_ERR_IO || st == TC_ERR_SHAPE || st == TC_ERR_DTYPE ||
                 st == TC_ERR_INVALID || st == TC_ERR_MEMORY;
    if (!known || !strstr(tc_last_error(), api))
        fail_msg("mutant %zu: status %d, message \"%s\" (want one naming %s)", i, (int)st,
                 tc_last_error(), api);
}

/* ---- IDX ------------------------------------------------------------------------ */

/* one load of the file at path: a tensor whose element count matches the
 * bytes read, or a clean failure */
static void load_idx(const char *path, size_t i, int *ok) {
    tc_tensor *t = tc_idx_load(path, NULL);
    if (!t) {
        check_failure(tc_last_status(), "tc_idx_load", i);
        return;
    }
    tc_dtype dt = tc_get_dtype(t);
    assert_true(dt == TC_UINT8 || dt == TC_INT8 || dt == TC_INT16 || dt == TC_INT32 || dt == TC_FLOAT32);
    int64_t numel = 1;
    for (int d = 0; d < tc_ndim(t); d++) numel *= tc_shape(t)[d];
    assert_int_equal(numel, tc_numel(t));
    void *v = tc_test_read(t); /* every element readable */
    free(v);
    tc_release(t);
    (*ok)++;
}

static void fuzz_idx(bool gz, int type) {
    char dir[256], p[1024];
    fuzz_dir(dir, sizeof dir);
    unsigned char body[96];
    for (int i = 0; i < 96; i++) body[i] = (unsigned char)(i * 37 + 11);
    int esize = type == 0x08 ? 1 : 4;
    const uint32_t dims[3] = {2, 3, (uint32_t)(16 / esize)};
    size_t len;
    unsigned char *b = idx_bytes(type, 3, dims, body, (size_t)(96 / esize) * (size_t)esize, &len);
    write_file(join(p, sizeof p, dir, "seed"), b, len, gz, 0);
    free(b);
    size_t n;
    unsigned char *seed = slurp(p, &n), *m = malloc(n + 64);
    assert_non_null(m);
    uint64_t rs = 0x1D0ULL + (uint64_t)type * 2 + gz;
    int ok = 0, total = iters();
    join(p, sizeof p, dir, "m");
    for (int i = 0; i < total; i++) {
        put(p, m, mutate(seed, n, m, &rs));
        load_idx(p, (size_t)i, &ok);
    }
    printf("idx type 0x%02x%s: %d mutants, %d loaded\n", type, gz ? " gzip" : "", total, ok);
    assert_true(ok < total); /* most mutants are bad files */
    free(seed), free(m);
    remove_tmpdir(dir, (const char *[]){"seed", "m"}, 2);
}

static void test_fuzz_idx_u8(void **state) {
    (void)state;
    fuzz_idx(false, 0x08);
}

static void test_fuzz_idx_i32_f32(void **state) {
    (void)state;
    fuzz_idx(false, 0x0C);
    fuzz_idx(false, 0x0D);
}

static void test_fuzz_idx_gzip(void **state) {
    (void)state;
    fuzz_idx(true, 0x08);
}

/* four MNIST-named files, one of them mutated each time */
static void test_fuzz_mnist(void **state) {
    (void)state;
    static const char *names[4] = {"train-images-idx3-ubyte", "train-labels-idx1-ubyte",
                                   "t10k-images-idx3-ubyte", "t10k-labels-idx1-ubyte"};
    char dir[256], p[1024];
    fuzz_dir(dir, sizeof dir);
    uint8_t px[3 * 4], lb[3] = {0, 9, 4};
    for (int i = 0; i < 12; i++) px[i] = (uint8_t)(i * 20);
    unsigned char *seeds[4];
    size_t lens[4];
    for (int f = 0; f < 4; f++) {
        bool img = f % 2 == 0;
        seeds[f] = img ? idx_bytes(0x08, 3, (uint32_t[]){3, 2, 2}, px, 12, &lens[f])
                       : idx_bytes(0x08, 1, (uint32_t[]){3}, lb, 3, &lens[f]);
        put(join(p, sizeof p, dir, names[f]), seeds[f], lens[f]);
    }
    tc_mnist m;
    CHECK_OK(tc_mnist_load(dir, NULL, &m));
    tc_mnist_release(&m);
    unsigned char *buf = malloc(64 + 64);
    uint64_t rs = 0x5EEDULL;
    int ok = 0, total = iters() / 2;
    for (int i = 0; i < total; i++) {
        int f = (int)below(&rs, 4);
        join(p, sizeof p, dir, names[f]);
        put(p, buf, mutate(seeds[f], lens[f], buf, &rs));
        memset(&m, 0, sizeof m);
        tc_status st = tc_mnist_load(dir, NULL, &m);
        if (st == TC_OK) {
            assert_int_equal(tc_shape(m.train_images)[0], tc_shape(m.train_labels)[0]);
            tc_mnist_release(&m);
            ok++;
        } else {
            check_failure(st, "tc_mnist_load", (size_t)i);
            assert_null(m.train_images); /* *out untouched */
        }
        put(p, seeds[f], lens[f]);
    }
    printf("mnist: %d mutants, %d loaded\n", total, ok);
    for (int f = 0; f < 4; f++) free(seeds[f]);
    free(buf);
    remove_tmpdir(dir, names, 4);
}

/* ---- safetensors ------------------------------------------------------------------ */

enum { N_ST = 3 };

static void test_fuzz_safetensors(void **state) {
    (void)state;
    char dir[256], p[1024];
    fuzz_dir(dir, sizeof dir);
    const char *names[N_ST] = {"w", "b", "steps"};
    float wv[6] = {1, -2, 3.5f, 4, 5, 6}, bv[2] = {0.5f, -0.5f};
    int32_t sv[1] = {7};
    tc_tensor *src[N_ST] = {tc_from_data(wv, TC_FLOAT32, 2, SHAPE(2, 3), NULL),
                            tc_from_data(bv, TC_FLOAT32, 1, SHAPE(2), NULL),
                            tc_from_data(sv, TC_INT32, 1, SHAPE(1), NULL)};
    for (int i = 0; i < N_ST; i++) CHECK_T(src[i]);
    CHECK_OK(tc_safe_save(join(p, sizeof p, dir, "seed"), names, src, N_ST));
    size_t n;
    unsigned char *seed = slurp(p, &n), *m = malloc(n + 64);
    assert_non_null(m);
    tc_tensor *dst[N_ST] = {tc_zeros(2, SHAPE(2, 3), TC_FLOAT32, NULL),
                            tc_zeros(1, SHAPE(2), TC_FLOAT32, NULL),
                            tc_zeros(1, SHAPE(1), TC_INT32, NULL)};
    for (int i = 0; i < N_ST; i++) CHECK_T(dst[i]);
    CHECK_OK(tc_realize(dst, N_ST));
    uint64_t rs = 0x5AFEULL;
    int ok = 0, total = 3 * iters();
    join(p, sizeof p, dir, "m");
    for (int i = 0; i < total; i++) {
        for (int k = 0; k < N_ST; k++) { /* back to zeros */
            tc_tensor *z = tc_zeros(tc_ndim(dst[k]), tc_shape(dst[k]), tc_get_dtype(dst[k]), NULL);
            CHECK_T(z);
            CHECK_OK(tc_assign(dst[k], z));
            tc_release(z);
        }
        CHECK_OK(tc_realize(dst, N_ST));
        put(p, m, mutate(seed, n, m, &rs));
        tc_status st = tc_safe_load(p, names, dst, N_ST);
        if (st == TC_OK) {
            ok++;
            continue;
        }
        check_failure(st, "tc_safe_load", (size_t)i);
        if (st == TC_ERR_MEMORY) continue; /* may leave some loaded (tinyc.h) */
        float *w = tc_test_read(dst[0]); /* a failed check changed nothing */
        for (int e = 0; e < 6; e++) assert_true(w[e] == 0.0f);
        free(w);
    }
    printf("safetensors: %d mutants, %d loaded\n", total, ok);
    assert_true(ok < total);
    for (int i = 0; i < N_ST; i++) tc_release(src[i]), tc_release(dst[i]);
    free(seed), free(m);
    remove_tmpdir(dir, (const char *[]){"seed", "m"}, 2);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        TEST(test_fuzz_idx_u8),   TEST(test_fuzz_idx_i32_f32), TEST(test_fuzz_idx_gzip),
        TEST(test_fuzz_mnist),    TEST(test_fuzz_safetensors),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
