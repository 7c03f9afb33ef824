/* idx.c - IDX files (the MNIST format) -> tensors: tc_idx_load and the
 * four-file MNIST loader tc_mnist_load.
 *
 * An IDX file is a 4-byte magic (0, 0, a type code, the number of dims), one
 * big-endian uint32 size per dim, then the elements in row-major order, big-
 * endian. Type codes read here: 0x08 uint8 -> TC_UINT8, 0x09 int8 -> TC_INT8,
 * 0x0B int16 -> TC_INT16, 0x0C int32 -> TC_INT32, 0x0D float32 -> TC_FLOAT32,
 * 0x0E float64 -> TC_FLOAT64. The file may be gzip-compressed (gz.c). Every defect (missing file, wrong magic, truncated data, bytes after
 * the data, labels that do not fit the images) is a TC_ERR_IO or
 * TC_ERR_SHAPE error naming the file; the caller owns the returned tensors. */
#include "nn.h"

#include <string.h>

typedef struct {
    tc_dtype dtype;             /* element type of the data */
    int ndim;                   /* number of dims, 1..TC_MAX_DIMS */
    int64_t shape[TC_MAX_DIMS]; /* size per dim */
    int64_t numel;              /* product of shape */
    void *data;                 /* numel host elements in host byte order (tc_malloc'ed) */
} idx_data;

static uint32_t be32(const unsigned char *p) {
    return (uint32_t)p[0] << 24 | (uint32_t)p[1] << 16 | (uint32_t)p[2] << 8 | p[3];
}

/* reads and checks the magic and the dims of f into d */
TC_MUST_USE static tc_status read_header(tc_gzfile *f, const char *api, const char *path, idx_data *d) {
    unsigned char m[4];
    int64_t got = tc_gz_read(f, m, 4);
    if (got < 0) return TC_ERR_IO;
    if (got < 4)
        return tc_error_set(TC_ERR_IO, "%s: %s is not an IDX file: it has only %lld bytes", api,
                            path, (long long)got);
    uint32_t magic = be32(m);
    static const tc_dtype types[7] = {TC_UINT8, TC_INT8,    TC_DTYPE_COUNT, TC_INT16,
                                      TC_INT32, TC_FLOAT32, TC_FLOAT64}; /* codes 0x08..0x0E */
    if (m[0] != 0 || m[1] != 0 || m[2] < 0x08 || m[2] > 0x0E || types[m[2] - 0x08] == TC_DTYPE_COUNT)
        return tc_error_set(TC_ERR_IO,
                            "%s: %s has the wrong magic 0x%08x for an IDX file "
                            "(want 0x0000TTNN with type TT 08, 09, 0B, 0C, 0D or 0E)",
                            api, path, magic);
    d->dtype = types[m[2] - 0x08];
    d->ndim = m[3];
    if (d->ndim < 1 || d->ndim > TC_MAX_DIMS)
        return tc_error_set(TC_ERR_IO, "%s: %s (magic 0x%08x) has %d dims; 1..%d are read", api,
                            path, magic, d->ndim, TC_MAX_DIMS);
    unsigned char dims[4 * TC_MAX_DIMS];
    got = tc_gz_read(f, dims, 4 * d->ndim);
    if (got < 0) return TC_ERR_IO;
    if (got < 4 * d->ndim)
        return tc_error_set(TC_ERR_IO,
                            "%s: %s is truncated in its header: %d dims need %d "
                            "bytes of sizes, it has %lld",
                            api, path, d->ndim, 4 * d->ndim, (long long)got);
    d->numel = 1;
    for (int i = 0; i < d->ndim; i++) {
        d->shape[i] = be32(dims + 4 * i);
        if (d->shape[i] > 0 && d->numel > (INT64_MAX / 8) / d->shape[i])
            return tc_error_set(TC_ERR_IO, "%s: %s claims too many elements", api, path);
        d->numel *= d->shape[i];
    }
    return TC_OK;
}

/* converts n big-endian elements of esize bytes (2, 4 or 8) in place to host order */
static void swap_be(void *data, int64_t n, size_t esize) {
    unsigned char *p = data;
    for (int64_t i = 0; i < n; i++, p += esize) {
        if (esize == 8) {
            uint64_t v = (uint64_t)be32(p) << 32 | be32(p + 4);
            memcpy(p, &v, 8);
        } else if (esize == 4) {
            uint32_t v = be32(p);
            memcpy(p, &v, 4);
        } else {
            uint16_t v = (uint16_t)(p[0] << 8 | p[1]);
            memcpy(p, &v, 2);
        }
    }
}

/* reads up to want bytes into d->data, growing it (doubling from 1 MiB) as
 * bytes arrive, so a header that claims more than the file holds costs what
 * the file holds, not what it claims; *got: the bytes read */
TC_MUST_USE static tc_status read_growing(tc_gzfile *f, idx_data *d, int64_t want, int64_t *got) {
    int64_t cap = want < ((int64_t)1 << 20) ? want : (int64_t)1 << 20;
    *got = 0;
    d->data = tc_malloc(cap ? (size_t)cap : 1);
    if (!d->data) return TC_ERR_MEMORY;
    for (;;) {
        int64_t n = tc_gz_read(f, (char *)d->data + *got, cap - *got);
        if (n < 0) return TC_ERR_IO;
        *got += n;
        if (*got < cap || cap == want) return TC_OK;
        int64_t grown = cap > want / 2 ? want : cap * 2;
        void *p = tc_realloc(d->data, (size_t)grown);
        if (!p) return TC_ERR_MEMORY;
        d->data = p, cap = grown;
    }
}

/* reads the elements after the header into d->data, checking the length */
TC_MUST_USE static tc_status read_body(tc_gzfile *f, const char *api, const char *path, idx_data *d) {
    char buf[256];
    size_t esize = tc_dtype_size(d->dtype);
    int64_t nbytes = d->numel * (int64_t)esize;
    int64_t got = 0;
    tc_status s = read_growing(f, d, nbytes, &got);
    if (s != TC_OK) return s;
    if (got < nbytes)
        return tc_error_set(TC_ERR_IO,
                            "%s: %s is truncated: shape %s of %s needs %lld data "
                            "bytes, the file has %lld",
                            api, path, tc_fmt_shape(buf, sizeof buf, d->ndim, d->shape),
                            tc_dtype_name(d->dtype), (long long)nbytes, (long long)got);
    unsigned char extra;
    got = tc_gz_read(f, &extra, 1);
    if (got < 0) return TC_ERR_IO;
    if (got > 0)
        return tc_error_set(TC_ERR_IO, "%s: %s has bytes after the %lld data bytes of shape %s",
                            api, path, (long long)nbytes,
                            tc_fmt_shape(buf, sizeof buf, d->ndim, d->shape));
    if (esize > 1) swap_be(d->data, d->numel, esize);
    return TC_OK;
}

/* reads the whole IDX file at path into d (d->data owned by the caller) */
TC_MUST_USE static tc_status idx_read(const char *path, const char *api, idx_data *d) {
    memset(d, 0, sizeof *d);
    tc_gzfile *f = tc_gz_open(path, api);
    if (!f) return tc_last_status();
    tc_status s = read_header(f, api, path, d);
    if (s == TC_OK) s = read_body(f, api, path, d);
    tc_gz_close(f);
    if (s != TC_OK) {
        tc_free(d->data);
        d->data = NULL;
    }
    return s;
}

TC_API tc_tensor *tc_idx_load(const char *path, const char *device) {
    TC_API_ENTER();
    idx_data d;
    if (idx_read(path, "tc_idx_load", &d) != TC_OK) return NULL;
    tc_tensor *t = tc_from_data(d.data, d.dtype, d.ndim, d.shape, device);
    tc_free(d.data);
    return t;
}

/* ---- MNIST ---------------------------------------------------------------- */

/* the four files, by their names in the original distribution */
static const char *const mnist_names[4] = {
    "train-images-idx3-ubyte",
    "train-labels-idx1-ubyte",
    "t10k-images-idx3-ubyte",
    "t10k-labels-idx1-ubyte",
};

/* finds name in dir as it is or with .gz, or with "-idx" written ".idx"
 * ("train-images.idx3-ubyte", as some unpacked copies are named), with or
 * without .gz; writes the path found to out */
TC_MUST_USE static tc_status find_file(const char *dir, const char *name, char *out, size_t cap) {
    char dotted[64];
    snprintf(dotted, sizeof dotted, "%s", name);
    char *p = strstr(dotted, "-idx");
    if (p) *p = '.';
    const char *bases[4] = {name, name, dotted, dotted};
    for (int i = 0; i < 4; i++) {
        int n = snprintf(out, cap, "%s/%s%s", dir, bases[i], i % 2 ? ".gz" : "");
        if (n < 0 || (size_t)n >= cap)
            return tc_error_set(TC_ERR_INVALID, "tc_mnist_load: directory name %s is too long",
                                dir);
        FILE *f = fopen(out, "rb");
        if (f) {
            fclose(f);
            return TC_OK;
        }
    }
    return tc_error_set(TC_ERR_IO, "tc_mnist_load: no %s in %s (tried %s, %s.gz, %s, %s.gz)", name,
                        dir, name, name, dotted, dotted);
}

/* images (N,rows,cols) and labels (N) of one split, both uint8, labels < 10 */
TC_MUST_USE static tc_status check_split(const char *ipath, const idx_data *im, const char *lpath,
                             const idx_data *lb) {
    const char *api = "tc_mnist_load";
    char buf[256];
    if (im->dtype != TC_UINT8 || im->ndim != 3)
        return tc_error_set(TC_ERR_SHAPE,
                            "%s: %s holds %s %s; MNIST images are uint8 "
                            "(N,rows,cols)",
                            api, ipath, tc_dtype_name(im->dtype),
                            tc_fmt_shape(buf, sizeof buf, im->ndim, im->shape));
    if (lb->dtype != TC_UINT8 || lb->ndim != 1)
        return tc_error_set(TC_ERR_SHAPE, "%s: %s holds %s %s; MNIST labels are uint8 (N)", api,
                            lpath, tc_dtype_name(lb->dtype),
                            tc_fmt_shape(buf, sizeof buf, lb->ndim, lb->shape));
    if (im->shape[0] != lb->shape[0])
        return tc_error_set(TC_ERR_SHAPE, "%s: %s has %lld images but %s has %lld labels", api,
                            ipath, (long long)im->shape[0], lpath, (long long)lb->shape[0]);
    const uint8_t *labels = lb->data;
    for (int64_t i = 0; i < lb->numel; i++)
        if (labels[i] > 9)
            return tc_error_set(TC_ERR_IO,
                                "%s: label %d at index %lld of %s is out of range "
                                "0..9",
                                api, labels[i], (long long)i, lpath);
    return TC_OK;
}

/* reads the 4 files into d[0..3] (checked), then makes the tensors */
TC_MUST_USE static tc_status mnist_read(const char *dir, const char *device, idx_data d[4], tc_mnist *out) {
    char paths[4][1024];
    for (int i = 0; i < 4; i++) {
        tc_status s = find_file(dir, mnist_names[i], paths[i], sizeof paths[i]);
        if (s == TC_OK) s = idx_read(paths[i], "tc_mnist_load", &d[i]);
        if (s != TC_OK) return s;
    }
    for (int i = 0; i < 4; i += 2) {
        tc_status s = check_split(paths[i], &d[i], paths[i + 1], &d[i + 1]);
        if (s != TC_OK) return s;
    }
    tc_tensor **slots[4] = {&out->train_images, &out->train_labels, &out->test_images,
                            &out->test_labels};
    for (int i = 0; i < 4; i++) {
        *slots[i] = tc_from_data(d[i].data, d[i].dtype, d[i].ndim, d[i].shape, device);
        if (!*slots[i]) return tc_last_status();
    }
    return TC_OK;
}

TC_API tc_status tc_mnist_load(const char *dir, const char *device, tc_mnist *out) {
    TC_API_ENTER();
    if (!dir || !out)
        return tc_error_set(TC_ERR_INVALID, "tc_mnist_load: %s is NULL", dir ? "out" : "dir");
    idx_data d[4];
    memset(d, 0, sizeof d);
    tc_mnist m = {0};
    tc_status s = mnist_read(dir, device, d, &m);
    for (int i = 0; i < 4; i++) tc_free(d[i].data);
    if (s != TC_OK) {
        tc_mnist_release(&m);
        return s;
    }
    *out = m;
    return TC_OK;
}

TC_API void tc_mnist_release(tc_mnist *m) {
    TC_API_ENTER();
    if (!m) return;
    tc_release(m->train_images);
    tc_release(m->train_labels);
    tc_release(m->test_images);
    tc_release(m->test_labels);
    memset(m, 0, sizeof *m);
}
