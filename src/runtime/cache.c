/* cache.c - the on-disk program cache of the OpenCL and CUDA devices.
 *
 * A cached program is one file <tc_cachedir()>/<key><ext> (key: 32 hex
 * characters from tc_hash_hex; ext: ".clbin", ".ptx"). Loads read the whole
 * file; stores write a temp file in the same directory and rename() it into
 * place, so a reader never sees half a file and racing writers each publish
 * a complete one. The cache is an optimisation: callers go on without it
 * when a store fails. (The CPU device keeps its own .so files, cpu.h.)
 */
#include "runtime/runtime.h"

#include <errno.h>
#include <stdarg.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#define CACHE_FILE_MAX ((size_t)1 << 30) /* larger files are not program binaries */

/* "<dir>/<key><ext>" into buf; false when it does not fit */
static bool cache_path(char *buf, size_t size, const char *key, const char *ext) {
    const char *dir = tc_cachedir();
    int n = snprintf(buf, size, "%s/%s%s", dir ? dir : "/tmp", key, ext);
    return n > 0 && (size_t)n < size;
}

/* mkdir -p of the cache directory (mode 0700 for what it creates) */
static tc_status cache_mkdirs(const char *api) {
    const char *dir = tc_cachedir();
    char p[4096];
    if (!dir || snprintf(p, sizeof p, "%s", dir) >= (int)sizeof p)
        return tc_error_set(TC_ERR_IO, "%s: bad cache directory", api);
    for (char *s = p + 1;; s++) {
        char c = *s;
        if (c != '/' && c != '\0') continue;
        *s = '\0';
        if (mkdir(p, 0700) != 0 && errno != EEXIST)
            return tc_error_set(TC_ERR_IO, "%s: cannot create cache directory '%s': %s", api, p,
                                strerror(errno));
        *s = c;
        if (c == '\0') break;
    }
    return TC_OK;
}

tc_status tc_cache_load(const char *key, const char *ext, char **data, size_t *n) {
    char path[4200];
    *data = NULL;
    *n = 0;
    if (!cache_path(path, sizeof path, key, ext)) return TC_OK;
    int fd = open(path, O_RDONLY);
    if (fd < 0) return TC_OK; /* not cached */
    struct stat sb;
    char *buf = NULL;
    size_t size = 0, done = 0;
    if (fstat(fd, &sb) == 0 && sb.st_size > 0 && (size_t)sb.st_size < CACHE_FILE_MAX) {
        size = (size_t)sb.st_size;
        buf = tc_malloc(size + 1);
    }
    while (buf && done < size) {
        ssize_t r = read(fd, buf + done, size - done);
        if (r < 0 && errno == EINTR) continue;
        if (r <= 0) break;
        done += (size_t)r;
    }
    close(fd);
    if (!buf || done != size) { /* unreadable: treated as absent */
        tc_free(buf);
        return buf || tc_error_code() != TC_ERR_MEMORY ? TC_OK : TC_ERR_MEMORY;
    }
    buf[size] = '\0';
    *data = buf;
    *n = size;
    return TC_OK;
}

tc_status tc_cache_store(const char *key, const char *ext, const void *data, size_t n) {
    char path[4200], tmp[4300];
    if (!cache_path(path, sizeof path, key, ext))
        return tc_error_set(TC_ERR_IO, "tc_cache_store: cache path too long");
    tc_status st = cache_mkdirs("tc_cache_store");
    if (st != TC_OK) return st;
    snprintf(tmp, sizeof tmp, "%s.XXXXXX", path);
    int fd = mkstemp(tmp);
    if (fd < 0)
        return tc_error_set(TC_ERR_IO, "tc_cache_store: cannot create '%s': %s", tmp,
                            strerror(errno));
    size_t done = 0;
    while (done < n) {
        ssize_t w = write(fd, (const char *)data + done, n - done);
        if (w < 0 && errno == EINTR) continue;
        if (w <= 0) break;
        done += (size_t)w;
    }
    int err = done < n ? (errno ? errno : EIO) : 0;
    if (close(fd) != 0 && !err) err = errno;
    if (!err && rename(tmp, path) != 0) err = errno;
    if (err) {
        unlink(tmp);
        return tc_error_set(TC_ERR_IO, "tc_cache_store: cannot write '%s': %s", path,
                            strerror(err));
    }
    return TC_OK;
}

tc_status tc_cache_key(char key[33], const char *who, const char *fmt, ...) {
    tc_strbuf b = {0};
    va_list ap;
    va_start(ap, fmt);
    tc_sb_vprintf(&b, fmt, ap);
    va_end(ap);
    tc_status st = TC_OK;
    if (b.failed || !b.s)
        st = tc_error_set(TC_ERR_MEMORY, "%s compile: out of memory hashing the source", who);
    else
        tc_hash_hex(b.s, b.len, key);
    tc_sb_free(&b);
    return st;
}

void tc_cache_put(const char *key, const char *ext, const void *data, size_t n) {
    if (tc_cache_store(key, ext, data, n) != TC_OK) tc_error_clear();
}
