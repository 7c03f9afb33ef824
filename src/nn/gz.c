/* gz.c - reading a file that may be gzip-compressed: path -> bytes.
 *
 * The first two bytes decide: 1f 8b is gzip, read through zlib's gzopen and
 * gzread; anything else is read with stdio as it is. zlib is not linked:
 * libz.so.1 is dlopen'ed per compressed file (and dlclose'd with it), so the
 * library and its users need no extra link flags, and a missing zlib is a
 * clear error only for compressed files. Each tc_gzfile owns its FILE or
 * gzFile and its dlopen handle. */
#include "nn.h"

#include <dlfcn.h>
#include <errno.h>
#include <string.h>

/* the zlib calls we use, looked up by name (zlib.h's prototypes) */
typedef void *(*gzopen_fn)(const char *path, const char *mode);
typedef int (*gzread_fn)(void *file, void *buf, unsigned len);
typedef int (*gzclose_fn)(void *file);
typedef const char *(*gzerror_fn)(void *file, int *errnum);
typedef int (*gzbuffer_fn)(void *file, unsigned size);

struct tc_gzfile {
    FILE *plain;      /* an uncompressed file, or NULL */
    void *gz;         /* zlib's gzFile for a compressed one, or NULL */
    void *zlib;       /* dlopen handle of libz while gz is open */
    gzread_fn gzread; /* zlib entry points (compressed files only) */
    gzclose_fn gzclose;
    gzerror_fn gzerror;
    const char *api; /* the public call, for messages (static string) */
    char path[512];  /* the file name, for messages (truncated) */
};

/* true when the file starts with the gzip magic 1f 8b; false on short files */
static bool starts_gzip(FILE *f) {
    unsigned char m[2];
    bool is_gz = fread(m, 1, 2, f) == 2 && m[0] == 0x1f && m[1] == 0x8b;
    rewind(f);
    return is_gz;
}

/* loads zlib into f and opens f->path through it */
TC_MUST_USE static tc_status open_zlib(tc_gzfile *f) {
    f->zlib = dlopen("libz.so.1", RTLD_NOW | RTLD_LOCAL);
    if (!f->zlib) f->zlib = dlopen("libz.so", RTLD_NOW | RTLD_LOCAL);
    if (!f->zlib)
        return tc_error_set(TC_ERR_IO,
                            "%s: %s is gzip-compressed but zlib (libz.so.1) "
                            "could not be loaded: %s",
                            f->api, f->path, dlerror());
    gzopen_fn gzopen = (gzopen_fn)dlsym(f->zlib, "gzopen");
    gzbuffer_fn gzbuffer = (gzbuffer_fn)dlsym(f->zlib, "gzbuffer");
    f->gzread = (gzread_fn)dlsym(f->zlib, "gzread");
    f->gzclose = (gzclose_fn)dlsym(f->zlib, "gzclose");
    f->gzerror = (gzerror_fn)dlsym(f->zlib, "gzerror");
    if (!gzopen || !f->gzread || !f->gzclose || !f->gzerror)
        return tc_error_set(TC_ERR_IO, "%s: the zlib loaded for %s lacks gzopen/gzread", f->api,
                            f->path);
    f->gz = gzopen(f->path, "rb");
    if (!f->gz)
        return tc_error_set(TC_ERR_IO, "%s: cannot open %s: %s", f->api, f->path,
                            errno ? strerror(errno) : "zlib's gzopen failed");
    if (gzbuffer) gzbuffer(f->gz, 1u << 17); /* fewer, larger reads */
    return TC_OK;
}

tc_gzfile *tc_gz_open(const char *path, const char *api) {
    if (!path) {
        tc_error_set(TC_ERR_INVALID, "%s: path is NULL", api);
        return NULL;
    }
    FILE *plain = fopen(path, "rb");
    if (!plain) {
        tc_error_set(TC_ERR_IO, "%s: cannot open %s: %s", api, path, strerror(errno));
        return NULL;
    }
    tc_gzfile *f = tc_calloc(1, sizeof *f);
    if (!f) {
        fclose(plain);
        return NULL;
    }
    f->api = api;
    snprintf(f->path, sizeof f->path, "%s", path);
    if (!starts_gzip(plain)) {
        f->plain = plain;
        return f;
    }
    fclose(plain);
    errno = 0;
    if (open_zlib(f) != TC_OK) {
        tc_gz_close(f);
        return NULL;
    }
    return f;
}

bool tc_gz_is_compressed(const tc_gzfile *f) {
    return f && f->gz;
}

int64_t tc_gz_read(tc_gzfile *f, void *dst, int64_t n) {
    int64_t got = 0;
    while (got < n) {
        int64_t want = n - got;
        if (want > (1 << 30)) want = 1 << 30; /* gzread takes an unsigned */
        int64_t r;
        if (f->plain) {
            r = (int64_t)fread((char *)dst + got, 1, (size_t)want, f->plain);
            if (r == 0 && ferror(f->plain)) {
                tc_error_set(TC_ERR_IO, "%s: reading %s failed: %s", f->api, f->path,
                             strerror(errno));
                return -1;
            }
        } else {
            r = f->gzread(f->gz, (char *)dst + got, (unsigned)want);
            if (r < 0) {
                int code = 0;
                tc_error_set(TC_ERR_IO, "%s: %s is not a valid gzip stream: %s", f->api, f->path,
                             f->gzerror(f->gz, &code));
                return -1;
            }
        }
        if (r == 0) break; /* end of the data */
        got += r;
    }
    return got;
}

void tc_gz_close(tc_gzfile *f) {
    if (!f) return;
    if (f->plain) fclose(f->plain);
    if (f->gz) f->gzclose(f->gz);
    if (f->zlib) dlclose(f->zlib);
    tc_free(f);
}
