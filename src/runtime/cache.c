/* cache.c - the on-disk caches' files: sealed entries, and the program
 * cache of the OpenCL and CUDA devices (and beam search's plans).
 *
 * Seals: every entry a libtinyc cache publishes ends with a seal of
 * TC_CACHE_SEAL_LEN bytes, "tinyc-seal1 <key> <size> <sum>\n": the 32 hex
 * characters of the entry's key, the bytes before the seal (16 hex digits)
 * and a 64-bit sum of them (16 hex digits; 4 lanes of multiply-rotate
 * rounds over 8-byte words in host byte order, then the tail bytes: 4.5 to
 * 11 GB/s on a 2-core Zen 3 VM under load). An entry is used only when its
 * seal names its key and its size and sum match, so a file cut short (a
 * full disk, a restored backup), emptied, overwritten, copied under another
 * key's name or left by an older libtinyc is never loaded; callers rebuild
 * it. Checking reads
 * the file once, in 32 KiB pieces, with no allocation: a 15 KB kernel's .so
 * in 7 to 14 us (open, fstat, one read, the sum's 1.3 to 3.4 us), where its
 * dlopen and dlclose take 70 to 90 us on the same machine.
 *
 * The program cache: one file <tc_cachedir()>/<key><ext> (key: 32 hex
 * characters from tc_hash_hex; ext: ".clbin", ".ptx", ".beam"). Loads read
 * the whole file and give its bytes before the seal; stores write a temp
 * file in the same directory and rename() it into place, so a reader never
 * sees half a file and racing writers each publish a complete one. An entry
 * that does not verify is removed and counts as absent. The cache is an
 * optimisation: callers go on without it when a store fails. (The CPU
 * device keeps its own .so files, cpu.h, sealed the same way.)
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
#define SEAL_TAG       "tinyc-seal1 "    /* how a seal starts */
#define CHUNK          32768             /* bytes a check reads at a time (a multiple of 32) */

_Static_assert(TC_CACHE_SEAL_LEN == sizeof SEAL_TAG - 1 + 32 + 1 + 16 + 1 + 16 + 1,
               "TC_CACHE_SEAL_LEN is the length of the seal's text");

/* ---- sums ------------------------------------------------------------------- */

/* the running sum of a file's bytes: 4 lanes, one 8-byte word each per 32 bytes */
typedef struct {
    uint64_t lane[4]; /* the lanes' accumulators */
    uint64_t n;       /* bytes summed so far (whole 32-byte blocks) */
} sum_state;

static uint64_t rotl64(uint64_t x, int r) {
    return x << r | x >> (64 - r);
}

static void sum_init(sum_state *s) {
    for (int k = 0; k < 4; k++) s->lane[k] = 0x9e3779b97f4a7c15ULL * (uint64_t)(k + 1);
    s->n = 0;
}

/* sums the whole 32-byte blocks of p[0..n); returns how many bytes that was */
static size_t sum_blocks(sum_state *s, const unsigned char *p, size_t n) {
    uint64_t lane[4] = {s->lane[0], s->lane[1], s->lane[2], s->lane[3]}; /* in registers: p
                                                                            may alias s */
    size_t i = 0;
    for (; i + 32 <= n; i += 32)
        for (int k = 0; k < 4; k++) {
            uint64_t w;
            memcpy(&w, p + i + 8 * (size_t)k, sizeof w);
            lane[k] = rotl64(lane[k] + w * 0xc2b2ae3d27d4eb4fULL, 31) * 0x9e3779b185ebca87ULL;
        }
    for (int k = 0; k < 4; k++) s->lane[k] = lane[k];
    s->n += i;
    return i;
}

/* the sum, after the blocks, of the last n < 32 bytes tail[0..n) */
static uint64_t sum_finish(const sum_state *s, const unsigned char *tail, size_t n) {
    uint64_t h = (s->n + n) * 0x27d4eb2f165667c5ULL;
    for (int k = 0; k < 4; k++) h = tc_hash_combine(h, s->lane[k]);
    for (size_t i = 0; i < n; i++) h = (h ^ tail[i]) * 0x100000001b3ULL;
    h ^= h >> 33;
    h *= 0xff51afd7ed558ccdULL;
    h ^= h >> 33;
    return h;
}

uint64_t tc_cache_sum(const void *data, size_t n) {
    sum_state s;
    sum_init(&s);
    size_t done = sum_blocks(&s, data, n);
    return sum_finish(&s, (const unsigned char *)data + done, n - done);
}

void tc_cache_seal(char seal[TC_CACHE_SEAL_LEN + 1], const char *key, uint64_t size,
                   uint64_t sum) {
    snprintf(seal, TC_CACHE_SEAL_LEN + 1, SEAL_TAG "%-32.32s %016llx %016llx\n", key,
             (unsigned long long)size, (unsigned long long)sum);
}

/* ---- files -------------------------------------------------------------------- */

static void file_id(const struct stat *sb, tc_file_id *id) {
    *id = (tc_file_id){.dev = (uint64_t)sb->st_dev, .ino = (uint64_t)sb->st_ino,
                       .size = (uint64_t)sb->st_size, .ctime_s = (int64_t)sb->st_ctim.tv_sec,
                       .ctime_ns = (int64_t)sb->st_ctim.tv_nsec};
}

bool tc_file_id_get(const char *path, tc_file_id *id) {
    struct stat sb;
    if (lstat(path, &sb) != 0 || !S_ISREG(sb.st_mode)) return false;
    file_id(&sb, id);
    return true;
}

bool tc_file_id_equal(const tc_file_id *a, const tc_file_id *b) {
    return a->dev == b->dev && a->ino == b->ino && a->size == b->size &&
           a->ctime_s == b->ctime_s && a->ctime_ns == b->ctime_ns;
}

/* reads n bytes at offset into buf; false when the file has fewer */
static bool read_at(int fd, void *buf, size_t n, off_t offset) {
    size_t done = 0;
    while (done < n) {
        ssize_t r = pread(fd, (char *)buf + done, n - done, offset + (off_t)done);
        if (r < 0 && errno == EINTR) continue;
        if (r <= 0) return false;
        done += (size_t)r;
    }
    return true;
}

/* whether the open regular file fd of sb->st_size bytes ends in key's seal
 * matching the bytes before it; buf: CHUNK bytes of scratch. A file that
 * fits in buf takes one read; a larger one has its seal read first. */
static bool fd_is_whole(int fd, const struct stat *sb, const char *key, unsigned char *buf) {
    if (sb->st_size < TC_CACHE_SEAL_LEN || (uint64_t)sb->st_size > CACHE_FILE_MAX) return false;
    size_t size = (size_t)sb->st_size - TC_CACHE_SEAL_LEN;
    char want[TC_CACHE_SEAL_LEN + 1], got[TC_CACHE_SEAL_LEN];
    tc_cache_seal(want, key, size, 0);
    size_t head = TC_CACHE_SEAL_LEN - 17; /* the seal up to its sum */
    bool is_small = (size_t)sb->st_size <= CHUNK;
    if (is_small && !read_at(fd, buf, (size_t)sb->st_size, 0)) return false;
    if (is_small) memcpy(got, buf + size, TC_CACHE_SEAL_LEN);
    else if (!read_at(fd, got, TC_CACHE_SEAL_LEN, (off_t)size)) return false;
    if (memcmp(got, want, head) != 0)
        return false; /* cut, grown, emptied, another key's or no seal: no need to sum it */
    sum_state s;
    sum_init(&s);
    size_t at = 0;
    while (size - at >= 32) {
        size_t n = size - at < CHUNK ? (size - at) & ~(size_t)31 : CHUNK;
        if (!is_small && !read_at(fd, buf, n, (off_t)at)) return false;
        at += sum_blocks(&s, is_small ? buf + at : buf, n);
    }
    if (!is_small && !read_at(fd, buf, size - at, (off_t)at)) return false;
    tc_cache_seal(want, key, size, sum_finish(&s, is_small ? buf + at : buf, size - at));
    return memcmp(got, want, TC_CACHE_SEAL_LEN) == 0;
}

void tc_cache_check(const char *path, const char *key, tc_cache_entry *e) {
    *e = (tc_cache_entry){0};
    struct stat sb;
    /* O_NONBLOCK: a FIFO in the way does not block the open */
    int fd = open(path, O_RDONLY | O_NOFOLLOW | O_NONBLOCK);
    if (fd < 0 && lstat(path, &sb) == 0) { /* a link, or not ours to read */
        e->is_there = true;
        file_id(&sb, &e->id);
    }
    if (fd < 0) return;
    unsigned char buf[CHUNK];
    e->is_there = fstat(fd, &sb) == 0;
    if (e->is_there) file_id(&sb, &e->id);
    e->is_whole = e->is_there && S_ISREG(sb.st_mode) && fd_is_whole(fd, &sb, key, buf);
    close(fd);
}

void tc_cache_remove(const char *path, const tc_file_id *seen) {
    struct stat sb;
    if (lstat(path, &sb) != 0) return;
    tc_file_id id;
    file_id(&sb, &id);
    if (id.dev != seen->dev || id.ino != seen->ino) return; /* a writer's rename since */
    if (S_ISDIR(sb.st_mode)) rmdir(path); /* only when empty: never a tree of someone's files */
    else unlink(path);
}

TC_MUST_USE tc_status tc_cache_read(const char *path, const char *key, char **data, size_t *n,
                        tc_cache_entry *e) {
    *data = NULL;
    *n = 0;
    *e = (tc_cache_entry){0};
    struct stat sb, now;
    if (lstat(path, &sb) != 0) return TC_OK; /* nothing there */
    e->is_there = true;
    file_id(&sb, &e->id);
    int fd = S_ISREG(sb.st_mode) ? open(path, O_RDONLY | O_NOFOLLOW) : -1;
    bool ok = fd >= 0 && fstat(fd, &now) == 0 && now.st_dev == sb.st_dev &&
              now.st_ino == sb.st_ino && now.st_size >= TC_CACHE_SEAL_LEN &&
              (uint64_t)now.st_size < CACHE_FILE_MAX;
    size_t size = ok ? (size_t)now.st_size : 0;
    char *buf = ok ? tc_malloc(size + 1) : NULL;
    ok = buf && read_at(fd, buf, size, 0);
    if (fd >= 0) close(fd);
    if (ok) {
        size -= TC_CACHE_SEAL_LEN;
        char want[TC_CACHE_SEAL_LEN + 1];
        tc_cache_seal(want, key, size, tc_cache_sum(buf, size));
        ok = memcmp(buf + size, want, TC_CACHE_SEAL_LEN) == 0;
    }
    if (!ok) {
        bool is_oom = size && !buf;
        tc_free(buf);
        return is_oom ? TC_ERR_MEMORY : TC_OK;
    }
    buf[size] = '\0';
    e->is_whole = true;
    *data = buf;
    *n = size;
    return TC_OK;
}

TC_MUST_USE tc_status tc_cache_seal_file(const char *path, const char *key) {
    int fd = open(path, O_RDWR | O_APPEND);
    struct stat sb;
    unsigned char buf[CHUNK];
    bool ok = fd >= 0 && fstat(fd, &sb) == 0 && S_ISREG(sb.st_mode) &&
              (uint64_t)sb.st_size < CACHE_FILE_MAX;
    size_t size = ok ? (size_t)sb.st_size : 0, at = 0;
    sum_state s;
    sum_init(&s);
    while (ok && size - at >= 32) {
        size_t n = size - at < CHUNK ? (size - at) & ~(size_t)31 : CHUNK;
        ok = read_at(fd, buf, n, (off_t)at);
        if (ok) at += sum_blocks(&s, buf, n);
    }
    ok = ok && read_at(fd, buf, size - at, (off_t)at);
    char seal[TC_CACHE_SEAL_LEN + 1];
    if (ok) tc_cache_seal(seal, key, size, sum_finish(&s, buf, size - at));
    int err = ok ? 0 : fd < 0 ? errno : EIO;
    if (ok && write(fd, seal, TC_CACHE_SEAL_LEN) != TC_CACHE_SEAL_LEN) err = errno ? errno : EIO;
    if (fd >= 0 && close(fd) != 0 && !err) err = errno;
    if (err)
        return tc_error_set(TC_ERR_IO, "cannot seal cache entry '%s': %s", path, strerror(err));
    return TC_OK;
}

/* ---- the program cache ------------------------------------------------------------ */

/* "<dir>/<key><ext>" into buf; false when it does not fit */
static bool cache_path(char *buf, size_t size, const char *key, const char *ext) {
    const char *dir = tc_cachedir();
    int n = snprintf(buf, size, "%s/%s%s", dir ? dir : "/tmp", key, ext);
    return n > 0 && (size_t)n < size;
}

/* mkdir -p of the cache directory (mode 0700 for what it creates) */
TC_MUST_USE static tc_status cache_mkdirs(const char *api) {
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

TC_MUST_USE tc_status tc_cache_load(const char *key, const char *ext, char **data, size_t *n) {
    char path[4200];
    *data = NULL;
    *n = 0;
    if (!cache_path(path, sizeof path, key, ext)) return TC_OK;
    tc_cache_entry e;
    tc_status st = tc_cache_read(path, key, data, n, &e);
    if (st == TC_OK && e.is_there && !e.is_whole) tc_cache_remove(path, &e.id); /* rebuilt */
    return st;
}

/* writes n bytes of data to fd; 0 or an errno */
static int write_all(int fd, const void *data, size_t n) {
    size_t done = 0;
    while (done < n) {
        ssize_t w = write(fd, (const char *)data + done, n - done);
        if (w < 0 && errno == EINTR) continue;
        if (w <= 0) return w < 0 && errno ? errno : EIO;
        done += (size_t)w;
    }
    return 0;
}

TC_MUST_USE tc_status tc_cache_store(const char *key, const char *ext, const void *data, size_t n) {
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
    char seal[TC_CACHE_SEAL_LEN + 1];
    tc_cache_seal(seal, key, n, tc_cache_sum(data, n));
    int err = write_all(fd, data, n);
    if (!err) err = write_all(fd, seal, TC_CACHE_SEAL_LEN);
    if (close(fd) != 0 && !err) err = errno;
    struct stat sb; /* an empty directory in the way goes; a full one keeps its name */
    if (!err && lstat(path, &sb) == 0 && S_ISDIR(sb.st_mode)) rmdir(path);
    if (!err && rename(tmp, path) != 0) err = errno;
    if (err) {
        unlink(tmp);
        return tc_error_set(TC_ERR_IO, "tc_cache_store: cannot write '%s': %s", path,
                            strerror(err));
    }
    return TC_OK;
}
TC_MUST_USE tc_status tc_cache_key(char key[33], const char *who, const char *fmt, ...) {
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
    tc_error_state es;
    tc_error_save(&es);
    if (tc_cache_store(key, ext, data, n) != TC_OK) tc_error_restore(&es);
}
