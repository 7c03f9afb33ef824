/* str.c - string building, shape formatting and hashing. */
#include "util.h"

#include <string.h>

/* room for need more bytes and the NUL; false (and failed) when it cannot */
static bool sb_reserve(tc_strbuf *b, size_t need) {
    if (b->len + need + 1 <= b->cap) return true;
    size_t cap = b->cap ? b->cap : 256;
    while (cap < b->len + need + 1) cap *= 2;
    char *s = tc_realloc(b->s, cap);
    if (!s) {
        b->failed = true;
        return false;
    }
    b->s = s;
    b->cap = cap;
    return true;
}

/* formats straight into the free space; only text that does not fit is
 * formatted a second time, after the buffer grew (the renderers print a
 * kernel a few bytes at a time: one vsnprintf each, not two) */
void tc_sb_vprintf(tc_strbuf *b, const char *fmt, va_list ap) {
    if (b->failed) return;
    va_list ap2;
    va_copy(ap2, ap);
    size_t room = b->cap - b->len;
    int need = vsnprintf(room ? b->s + b->len : NULL, room, fmt, ap2);
    va_end(ap2);
    if (need < 0) return;
    if ((size_t)need >= room) {
        if (!sb_reserve(b, (size_t)need)) return;
        vsnprintf(b->s + b->len, b->cap - b->len, fmt, ap);
    }
    b->len += (size_t)need;
}

void tc_sb_append(tc_strbuf *b, const void *bytes, size_t n) {
    if (b->failed || !sb_reserve(b, n)) return;
    memcpy(b->s + b->len, bytes, n);
    b->len += n;
    b->s[b->len] = '\0';
}

void tc_sb_printf(tc_strbuf *b, const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    tc_sb_vprintf(b, fmt, ap);
    va_end(ap);
}

void tc_sb_free(tc_strbuf *b) {
    tc_free(b->s);
    memset(b, 0, sizeof *b);
}

const char *tc_fmt_shape(char *buf, size_t bufsize, int ndim, const int64_t *shape) {
    size_t at = 0;
    at += (size_t)snprintf(buf, bufsize, "(");
    for (int i = 0; i < ndim && at < bufsize; i++)
        at += (size_t)snprintf(buf + at, bufsize - at, "%s%lld", i ? "," : "",
                               (long long)shape[i]);
    if (at < bufsize) snprintf(buf + at, bufsize - at, ndim == 1 ? ",)" : ")");
    return buf;
}

/* 64-bit mix of a byte string (FNV-1a folded through a final avalanche) */
uint64_t tc_hash_bytes(const void *p, size_t n, uint64_t seed) {
    const unsigned char *s = p;
    uint64_t h = 0xcbf29ce484222325ULL ^ (seed * 0x9E3779B97F4A7C15ULL);
    for (size_t i = 0; i < n; i++) h = (h ^ s[i]) * 0x100000001b3ULL;
    h ^= h >> 33;
    h *= 0xff51afd7ed558ccdULL;
    h ^= h >> 33;
    return h;
}

uint64_t tc_hash_combine(uint64_t h, uint64_t v) {
    h ^= v + 0x9E3779B97F4A7C15ULL + (h << 6) + (h >> 2);
    h *= 0xbf58476d1ce4e5b9ULL;
    return h ^ (h >> 31);
}

void tc_hash_hex(const char *s, size_t n, char out[33]) {
    uint64_t a = tc_hash_bytes(s, n, 1), b = tc_hash_bytes(s, n, 2);
    snprintf(out, 33, "%016llx%016llx", (unsigned long long)a, (unsigned long long)b);
}
