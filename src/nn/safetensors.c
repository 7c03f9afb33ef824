/* safetensors.c - named tensors <-> a safetensors file: tc_safe_save and
 * tc_safe_load (the format of huggingface/safetensors and tinygrad's
 * nn.state.safe_save).
 *
 * A file is an 8-byte little-endian header length N, N bytes of JSON
 * {"name": {"dtype": "F32", "shape": [2, 3], "data_offsets": [begin, end]},
 * ..., "__metadata__": {...}} padded with spaces to a multiple of 8, then the
 * data: each tensor's elements row-major, little-endian, at [begin, end) of
 * the bytes after the header. The parser reads exactly this subset of JSON
 * (objects, arrays, strings, integers; other values are skipped). Loading
 * checks everything (names, dtypes, shapes, offsets, file length) before it
 * touches a tensor, then assigns all of them in one tc_realize, so a load
 * that fails a check changes nothing (out of memory part-way through the
 * assigns may leave some tensors loaded). */
#include "nn.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define MAX_HEADER (100 << 20) /* safetensors' own limit on the JSON header */

static const char *const st_dtype[TC_DTYPE_COUNT] = {
    [TC_FLOAT32] = "F32", [TC_FLOAT16] = "F16", [TC_INT32] = "I32",
    [TC_INT64] = "I64",   [TC_UINT8] = "U8",    [TC_BOOL] = "BOOL",
    [TC_INT8] = "I8",     [TC_INT16] = "I16",   [TC_UINT16] = "U16",
    [TC_UINT32] = "U32",  [TC_FLOAT64] = "F64", [TC_UINT64] = "U64",
    [TC_BFLOAT16] = "BF16",
};

/* ---- writing -------------------------------------------------------------- */

/* appends name as a JSON string */
static void json_string(tc_strbuf *b, const char *s) {
    tc_sb_printf(b, "\"");
    for (; *s; s++) {
        unsigned char c = (unsigned char)*s;
        if (c == '"' || c == '\\') tc_sb_printf(b, "\\%c", c);
        else if (c < 0x20) tc_sb_printf(b, "\\u%04x", c);
        else tc_sb_printf(b, "%c", c);
    }
    tc_sb_printf(b, "\"");
}

/* checks save's arguments: names non-empty and distinct, tensors non-NULL */
TC_MUST_USE static tc_status check_named(const char *api, const char *path, const char *const *names,
                             tc_tensor **ts, int n) {
    if (!path) return tc_error_set(TC_ERR_INVALID, "%s: path is NULL", api);
    if (n < 0 || (n > 0 && (!names || !ts)))
        return tc_error_set(TC_ERR_INVALID, "%s: %s", api,
                            n < 0    ? "n is negative"
                            : !names ? "names is NULL"
                                     : "ts is NULL");
    for (int i = 0; i < n; i++) {
        if (!names[i] || !names[i][0])
            return tc_error_set(TC_ERR_INVALID, "%s: names[%d] is %s", api, i,
                                names[i] ? "empty" : "NULL");
        if (!strcmp(names[i], "__metadata__"))
            return tc_error_set(TC_ERR_INVALID, "%s: names[%d] is the reserved __metadata__", api,
                                i);
        if (!ts[i])
            return tc_error_set(TC_ERR_INVALID, "%s: ts[%d] (%s) is NULL", api, i, names[i]);
        for (int j = 0; j < i; j++)
            if (!strcmp(names[i], names[j]))
                return tc_error_set(TC_ERR_INVALID, "%s: name %s appears twice (%d and %d)", api,
                                    names[i], j, i);
    }
    return TC_OK;
}

/* the JSON header for ts, padded with spaces to a multiple of 8 */
TC_MUST_USE static tc_status build_header(const char *api, tc_strbuf *b, const char *const *names,
                              tc_tensor **ts, int n) {
    int64_t off = 0;
    tc_sb_printf(b, "{");
    for (int i = 0; i < n; i++) {
        tc_dtype dt = tc_get_dtype(ts[i]);
        int64_t nbytes = tc_numel(ts[i]) * (int64_t)tc_dtype_size(dt);
        json_string(b, names[i]);
        tc_sb_printf(b, ":{\"dtype\":\"%s\",\"shape\":[", st_dtype[dt]);
        for (int d = 0; d < tc_ndim(ts[i]); d++)
            tc_sb_printf(b, "%s%lld", d ? "," : "", (long long)tc_shape(ts[i])[d]);
        tc_sb_printf(b, "],\"data_offsets\":[%lld,%lld]}%s", (long long)off,
                     (long long)(off + nbytes), i + 1 < n ? "," : "");
        off += nbytes;
    }
    tc_sb_printf(b, "}");
    while (b->len % 8) tc_sb_printf(b, " ");
    return b->failed ? tc_error_set(TC_ERR_MEMORY, "%s: out of memory", api) : TC_OK;
}

/* writes the header and each tensor's elements to f */
TC_MUST_USE static tc_status write_all(const char *api, FILE *f, const char *path, const tc_strbuf *hdr,
                           tc_tensor **ts, int n) {
    unsigned char len8[8];
    for (int i = 0; i < 8; i++) len8[i] = (unsigned char)((uint64_t)hdr->len >> (8 * i));
    if (fwrite(len8, 1, 8, f) != 8 || fwrite(hdr->s, 1, hdr->len, f) != hdr->len)
        return tc_error_set(TC_ERR_IO, "%s: writing %s failed: %s", api, path, strerror(errno));
    for (int i = 0; i < n; i++) {
        size_t nbytes = (size_t)tc_numel(ts[i]) * tc_dtype_size(tc_get_dtype(ts[i]));
        void *data = tc_malloc(nbytes ? nbytes : 1);
        if (!data) return TC_ERR_MEMORY;
        tc_status s = tc_to_host(ts[i], data, nbytes);
        if (s == TC_OK && fwrite(data, 1, nbytes, f) != nbytes)
            s = tc_error_set(TC_ERR_IO, "%s: writing %s failed: %s", api, path, strerror(errno));
        tc_free(data);
        if (s != TC_OK) return s;
    }
    return TC_OK;
}

TC_MUST_USE tc_status tc_safe_save_as(const char *api, const char *path, const char *const *names,
                          tc_tensor **ts, int n) {
    tc_status s = check_named(api, path, names, ts, n);
    if (s != TC_OK) return s;
    s = tc_realize(ts, n); /* one schedule for all, before anything is written */
    if (s != TC_OK) return s;
    tc_strbuf hdr = {0};
    s = build_header(api, &hdr, names, ts, n);
    char tmp[1100];
    snprintf(tmp, sizeof tmp, "%s.tmp%ld", path, (long)getpid());
    FILE *f = s == TC_OK ? fopen(tmp, "wb") : NULL;
    if (s == TC_OK && !f)
        s = tc_error_set(TC_ERR_IO, "%s: cannot create %s: %s", api, tmp, strerror(errno));
    if (s == TC_OK) s = write_all(api, f, path, &hdr, ts, n);
    if (f && fclose(f) != 0 && s == TC_OK)
        s = tc_error_set(TC_ERR_IO, "%s: writing %s failed: %s", api, path, strerror(errno));
    if (s == TC_OK && rename(tmp, path) != 0)
        s = tc_error_set(TC_ERR_IO, "%s: cannot rename %s to %s: %s", api, tmp, path,
                         strerror(errno));
    if (s != TC_OK && f) remove(tmp);
    tc_sb_free(&hdr);
    return s;
}

TC_API tc_status tc_safe_save(const char *path, const char *const *names, tc_tensor **ts, int n) {
    TC_API_ENTER();
    return tc_safe_save_as("tc_safe_save", path, names, ts, n);
}

/* ---- reading the header ------------------------------------------------------ */

typedef struct {
    char *name;                 /* the key, decoded (tc_malloc'ed) */
    int dtype;                  /* a tc_dtype, or -1 for one we do not read */
    char dtype_name[16];        /* as the file spells it, for messages */
    int ndim;                   /* entries in shape */
    int64_t shape[TC_MAX_DIMS]; /* the tensor's shape */
    int64_t begin, end;         /* data_offsets: bytes [begin, end) after the header */
} st_entry;

typedef struct {
    const char *start, *p, *end; /* the header text and the cursor in it */
    const char *api, *path;      /* for messages */
    st_entry *entries;           /* parsed entries (tc_malloc'ed) */
    int n_entries, cap;          /* used, allocated */
} st_parser;

TC_MUST_USE static tc_status bad(st_parser *j, const char *what) {
    return tc_error_set(TC_ERR_IO,
                        "%s: %s is not a safetensors file: %s at byte %lld of its "
                        "header",
                        j->api, j->path, what, (long long)(j->p - j->start));
}

static void ws(st_parser *j) {
    while (j->p < j->end && (*j->p == ' ' || *j->p == '\t' || *j->p == '\n' || *j->p == '\r'))
        j->p++;
}

static bool eat(st_parser *j, char c) {
    ws(j);
    if (j->p < j->end && *j->p == c) {
        j->p++;
        return true;
    }
    return false;
}

/* writes code point c (< 0x10000) as UTF-8 to s; returns the bytes written */
static size_t put_utf8(char *s, unsigned c) {
    if (c < 0x80) return s[0] = (char)c, 1;
    if (c < 0x800) return s[0] = (char)(0xC0 | c >> 6), s[1] = (char)(0x80 | (c & 63)), 2;
    s[0] = (char)(0xE0 | c >> 12), s[1] = (char)(0x80 | ((c >> 6) & 63));
    s[2] = (char)(0x80 | (c & 63));
    return 3;
}

/* one escape after a backslash -> its code point, or -1 */
static long escape(st_parser *j) {
    if (j->p >= j->end) return -1;
    switch (*j->p++) {
    case '"': return '"';
    case '\\': return '\\';
    case '/': return '/';
    case 'b': return '\b';
    case 'f': return '\f';
    case 'n': return '\n';
    case 'r': return '\r';
    case 't': return '\t';
    case 'u': {
        if (j->end - j->p < 4) return -1;
        char hex[5] = {j->p[0], j->p[1], j->p[2], j->p[3], 0}, *stop;
        long c = strtol(hex, &stop, 16);
        j->p += 4;
        return *stop ? -1 : c;
    }
    default: return -1;
    }
}

/* a JSON string; *out gets it decoded (tc_malloc'ed) when out is non-NULL.
 * \uXXXX escapes become UTF-8 (surrogate pairs stay two units) */
TC_MUST_USE static tc_status parse_string(st_parser *j, char **out) {
    if (!eat(j, '"')) return bad(j, "expected a string");
    char *s = tc_malloc((size_t)(j->end - j->p) + 1); /* decoding never grows the text */
    if (!s) return TC_ERR_MEMORY;
    size_t n = 0;
    while (j->p < j->end && *j->p != '"') {
        char c = *j->p++;
        if (c != '\\') {
            s[n++] = c; /* UTF-8 text is copied as it is */
            continue;
        }
        long e = escape(j);
        if (e < 0) {
            tc_free(s);
            return bad(j, "bad escape in a string");
        }
        n += put_utf8(s + n, (unsigned)e);
    }
    if (j->p >= j->end) {
        tc_free(s);
        return bad(j, "unterminated string");
    }
    j->p++;
    s[n] = 0;
    if (out) *out = s;
    else tc_free(s);
    return TC_OK;
}

TC_MUST_USE static tc_status parse_int(st_parser *j, int64_t *out) {
    ws(j);
    const char *q = j->p;
    int64_t v = 0;
    while (q < j->end && *q >= '0' && *q <= '9') {
        if (v > (INT64_MAX - 9) / 10) return bad(j, "integer too large");
        v = v * 10 + (*q++ - '0');
    }
    if (q == j->p) return bad(j, "expected a non-negative integer");
    j->p = q;
    *out = v;
    return TC_OK;
}

/* [int, ...] with at most max values */
TC_MUST_USE static tc_status parse_ints(st_parser *j, int64_t *out, int max, int *n) {
    if (!eat(j, '[')) return bad(j, "expected '['");
    *n = 0;
    if (eat(j, ']')) return TC_OK;
    do {
        if (*n >= max) return bad(j, "too many values in an array");
        tc_status s = parse_int(j, &out[(*n)++]);
        if (s != TC_OK) return s;
    } while (eat(j, ','));
    return eat(j, ']') ? TC_OK : bad(j, "expected ']'");
}

/* skips any JSON value (depth-limited) */
TC_MUST_USE static tc_status skip_value(st_parser *j, int depth) {
    ws(j);
    if (depth > 32) return bad(j, "nesting too deep");
    if (j->p >= j->end) return bad(j, "unexpected end");
    char c = *j->p;
    if (c == '"') return parse_string(j, NULL);
    if (c == '{' || c == '[') {
        char close = c == '{' ? '}' : ']';
        j->p++;
        if (eat(j, close)) return TC_OK;
        do {
            tc_status s = c == '{' ? parse_string(j, NULL) : TC_OK;
            if (s == TC_OK && c == '{' && !eat(j, ':')) s = bad(j, "expected ':'");
            if (s == TC_OK) s = skip_value(j, depth + 1);
            if (s != TC_OK) return s;
        } while (eat(j, ','));
        return eat(j, close) ? TC_OK : bad(j, "expected the end of an object or array");
    }
    while (j->p < j->end && strchr("+-.0123456789eEtruefalsn", *j->p)) j->p++; /* literals */
    return TC_OK;
}

/* __metadata__: an object whose values are strings (the format's rule) */
TC_MUST_USE static tc_status parse_metadata(st_parser *j) {
    if (!eat(j, '{')) return bad(j, "__metadata__ is not an object");
    if (eat(j, '}')) return TC_OK;
    do {
        tc_status s = parse_string(j, NULL);
        if (s == TC_OK && !eat(j, ':')) s = bad(j, "expected ':'");
        ws(j);
        if (s == TC_OK && (j->p >= j->end || *j->p != '"'))
            s = bad(j, "a __metadata__ value is not a string");
        if (s == TC_OK) s = parse_string(j, NULL);
        if (s != TC_OK) return s;
    } while (eat(j, ','));
    return eat(j, '}') ? TC_OK : bad(j, "expected the end of __metadata__");
}

/* {"dtype": ..., "shape": [...], "data_offsets": [b, e]} into e */
TC_MUST_USE static tc_status parse_entry(st_parser *j, st_entry *e) {
    if (!eat(j, '{')) return bad(j, "expected an object for a tensor");
    bool has[3] = {false, false, false};
    e->dtype = -1;
    while (!eat(j, '}')) {
        if (has[0] + has[1] + has[2] && !eat(j, ',')) return bad(j, "expected ','");
        char *key = NULL;
        tc_status s = parse_string(j, &key);
        if (s == TC_OK && !eat(j, ':')) s = bad(j, "expected ':'");
        if (s == TC_OK && !strcmp(key, "dtype")) {
            char *dt = NULL;
            if ((s = parse_string(j, &dt)) == TC_OK) {
                snprintf(e->dtype_name, sizeof e->dtype_name, "%s", dt);
                for (int d = 0; d < TC_DTYPE_COUNT; d++)
                    if (!strcmp(dt, st_dtype[d])) e->dtype = d;
                has[0] = true;
            }
            tc_free(dt);
        } else if (s == TC_OK && !strcmp(key, "shape")) {
            s = parse_ints(j, e->shape, TC_MAX_DIMS, &e->ndim);
            has[1] = true;
        } else if (s == TC_OK && !strcmp(key, "data_offsets")) {
            int64_t off[2];
            int n = 0;
            s = parse_ints(j, off, 2, &n);
            if (s == TC_OK && n != 2) s = bad(j, "data_offsets needs 2 values");
            e->begin = off[0], e->end = off[1];
            has[2] = true;
        } else if (s == TC_OK) {
            s = skip_value(j, 1);
        }
        tc_free(key);
        if (s != TC_OK) return s;
    }
    if (!has[0] || !has[1] || !has[2]) return bad(j, "a tensor lacks dtype, shape or data_offsets");
    return TC_OK;
}

TC_MUST_USE static tc_status parse_header(st_parser *j) {
    if (!eat(j, '{')) return bad(j, "expected '{'");
    if (eat(j, '}')) return TC_OK;
    do {
        char *key = NULL;
        tc_status s = parse_string(j, &key);
        if (s == TC_OK && !eat(j, ':')) s = bad(j, "expected ':'");
        if (s == TC_OK && !strcmp(key, "__metadata__")) {
            tc_free(key);
            s = parse_metadata(j);
        } else if (s == TC_OK) {
            if (j->n_entries == j->cap) {
                int cap = j->cap ? 2 * j->cap : 16;
                st_entry *grown = tc_realloc(j->entries, sizeof *grown * (size_t)cap);
                if (!grown) s = TC_ERR_MEMORY;
                else j->entries = grown, j->cap = cap;
            }
            if (s == TC_OK) {
                st_entry *e = &j->entries[j->n_entries++];
                memset(e, 0, sizeof *e);
                e->name = key;
                s = parse_entry(j, e);
            } else {
                tc_free(key);
            }
        } else {
            tc_free(key);
        }
        if (s != TC_OK) return s;
    } while (eat(j, ','));
    if (!eat(j, '}')) return bad(j, "expected '}'");
    ws(j);
    return j->p == j->end ? TC_OK : bad(j, "text after the header object");
}

/* ---- the file's layout ---------------------------------------------------- */

/* bytes per element of a dtype the format names; 0 for a name it does not */
static int64_t elem_size(const char *name) {
    static const struct {
        const char *name; /* as the format spells it */
        int64_t size;     /* bytes per element */
    } sizes[] = {{"BOOL", 1}, {"U8", 1},  {"I8", 1},  {"F8_E5M2", 1}, {"F8_E4M3", 1},
                 {"I16", 2},  {"U16", 2}, {"F16", 2}, {"BF16", 2},    {"I32", 4},
                 {"U32", 4},  {"F32", 4}, {"I64", 8}, {"U64", 8},     {"F64", 8}};
    for (size_t i = 0; i < sizeof sizes / sizeof *sizes; i++)
        if (!strcmp(name, sizes[i].name)) return sizes[i].size;
    return 0;
}

/* e's data_offsets hold exactly its shape's bytes of its dtype */
TC_MUST_USE static tc_status check_size(const st_parser *j, const st_entry *e) {
    int64_t size = elem_size(e->dtype_name), numel = 1;
    if (!size)
        return tc_error_set(TC_ERR_IO, "%s: %s: tensor %s has dtype %s, which safetensors does "
                            "not define", j->api, j->path, e->name, e->dtype_name);
    for (int d = 0; d < e->ndim && numel >= 0; d++)
        numel = e->shape[d] && numel > TC_MAX_NUMEL / e->shape[d] ? -1 : numel * e->shape[d];
    char b[256];
    if (numel < 0 || e->end < e->begin || e->end - e->begin != numel * size)
        return tc_error_set(TC_ERR_IO, "%s: %s: tensor %s's data_offsets [%lld,%lld] do not hold "
                            "shape %s of %s", j->api, j->path, e->name, (long long)e->begin,
                            (long long)e->end, tc_fmt_shape(b, sizeof b, e->ndim, e->shape),
                            e->dtype_name);
    return TC_OK;
}

static int by_name(const void *a, const void *b) {
    return strcmp((*(st_entry *const *)a)->name, (*(st_entry *const *)b)->name);
}

static int by_begin(const void *a, const void *b) {
    int64_t x = (*(st_entry *const *)a)->begin, y = (*(st_entry *const *)b)->begin;
    return (x > y) - (x < y);
}

/* the format's rules on the whole file: every name once, each tensor's
 * offsets holding its bytes, and the tensors tiling the data bytes exactly
 * (no gap, no overlap, nothing after the last). O(n log n) in the tensors */
TC_MUST_USE static tc_status check_layout(const st_parser *j, int64_t data_len) {
    int n = j->n_entries;
    st_entry **v = tc_malloc(sizeof *v * (size_t)(n + 1));
    if (!v) return TC_ERR_MEMORY;
    for (int i = 0; i < n; i++) v[i] = &j->entries[i];
    qsort(v, (size_t)n, sizeof *v, by_name);
    tc_status s = TC_OK;
    for (int i = 1; i < n && s == TC_OK; i++)
        if (!strcmp(v[i - 1]->name, v[i]->name))
            s = tc_error_set(TC_ERR_IO, "%s: %s names tensor %s twice", j->api, j->path, v[i]->name);
    for (int i = 0; i < n && s == TC_OK; i++) s = check_size(j, v[i]);
    if (s == TC_OK) qsort(v, (size_t)n, sizeof *v, by_begin);
    int64_t at = 0; /* where the next tensor must start */
    for (int i = 0; i < n && s == TC_OK; i++, at = v[i - 1]->end)
        if (v[i]->begin != at || v[i]->end > data_len)
            s = tc_error_set(TC_ERR_IO, "%s: %s: tensor %s's data_offsets [%lld,%lld] %s",
                             j->api, j->path, v[i]->name, (long long)v[i]->begin,
                             (long long)v[i]->end,
                             v[i]->begin < at ? "overlap the tensor before them"
                             : v[i]->begin > at ? "leave a gap after the tensor before them"
                                                : "end past the data bytes");
    if (s == TC_OK && at != data_len)
        s = tc_error_set(TC_ERR_IO, "%s: %s has %lld data bytes after its last tensor", j->api,
                         j->path, (long long)(data_len - at));
    tc_free(v);
    return s;
}

/* ---- loading ------------------------------------------------------------------ */

/* reads and parses the header of f into j; the data starts at *data_start and
 * is *data_len bytes long */
TC_MUST_USE static tc_status read_header(FILE *f, st_parser *j, int64_t *data_start, int64_t *data_len) {
    unsigned char len8[8];
    if (fseek(f, 0, SEEK_END) != 0)
        return tc_error_set(TC_ERR_IO, "%s: cannot seek in %s", j->api, j->path);
    int64_t size = ftell(f);
    rewind(f);
    if (size < 8 || fread(len8, 1, 8, f) != 8)
        return tc_error_set(TC_ERR_IO, "%s: %s is not a safetensors file: only %lld bytes", j->api,
                            j->path, (long long)size);
    uint64_t n = 0;
    for (int i = 7; i >= 0; i--) n = n << 8 | len8[i];
    if (n > MAX_HEADER || (int64_t)n > size - 8)
        return tc_error_set(TC_ERR_IO,
                            "%s: %s is not a safetensors file: header length %llu "
                            "in a file of %lld bytes",
                            j->api, j->path, (unsigned long long)n, (long long)size);
    char *text = tc_malloc(n ? (size_t)n : 1);
    if (!text) return TC_ERR_MEMORY;
    if (fread(text, 1, (size_t)n, f) != n) {
        tc_free(text);
        return tc_error_set(TC_ERR_IO, "%s: reading %s failed", j->api, j->path);
    }
    j->start = j->p = text;
    j->end = text + n;
    tc_status s = parse_header(j);
    j->p = j->start = j->end = NULL;
    tc_free(text);
    *data_start = 8 + (int64_t)n;
    *data_len = size - *data_start;
    return s == TC_OK ? check_layout(j, *data_len) : s;
}

/* the entry named name, checked against t (its offsets: check_layout) */
TC_MUST_USE static tc_status check_entry(st_parser *j, const char *name, tc_tensor *t, st_entry **out) {
    char a[256], b[256];
    st_entry *e = NULL;
    for (int i = 0; i < j->n_entries && !e; i++)
        if (!strcmp(j->entries[i].name, name)) e = &j->entries[i];
    if (!e) return tc_error_set(TC_ERR_IO, "%s: %s has no tensor %s", j->api, j->path, name);
    tc_dtype dt = tc_get_dtype(t);
    if (e->dtype != (int)dt)
        return tc_error_set(TC_ERR_DTYPE, "%s: %s is %s in %s but the tensor is %s", j->api, name,
                            e->dtype_name, j->path, tc_dtype_name(dt));
    bool same = e->ndim == tc_ndim(t);
    for (int d = 0; same && d < e->ndim; d++) same = e->shape[d] == tc_shape(t)[d];
    if (!same)
        return tc_error_set(TC_ERR_SHAPE, "%s: %s has shape %s in %s but the tensor %s", j->api,
                            name, tc_fmt_shape(a, sizeof a, e->ndim, e->shape), j->path,
                            tc_fmt_shape(b, sizeof b, tc_ndim(t), tc_shape(t)));
    *out = e; /* its offsets hold its bytes within the data: check_layout */
    return TC_OK;
}

/* checks every name, then reads each tensor's bytes into bufs[i] */
TC_MUST_USE static tc_status read_data(FILE *f, st_parser *j, const char *const *names, tc_tensor **ts, int n,
                           bool strict, void **bufs) {
    int64_t start = 0, len = 0;
    tc_status s = read_header(f, j, &start, &len);
    for (int e = 0; s == TC_OK && strict && e < j->n_entries; e++) {
        bool known = false;
        for (int i = 0; i < n && !known; i++) known = !strcmp(names[i], j->entries[e].name);
        if (!known)
            s = tc_error_set(TC_ERR_IO, "%s: %s has a tensor %s that is not expected here", j->api,
                             j->path, j->entries[e].name);
    }
    st_entry **found = tc_calloc((size_t)n + 1, sizeof *found);
    if (!found) return TC_ERR_MEMORY;
    for (int i = 0; s == TC_OK && i < n; i++) s = check_entry(j, names[i], ts[i], &found[i]);
    for (int i = 0; s == TC_OK && i < n; i++) {
        size_t nbytes = (size_t)(found[i]->end - found[i]->begin);
        if (!(bufs[i] = tc_malloc(nbytes ? nbytes : 1))) s = TC_ERR_MEMORY;
        else if (fseek(f, (long)(start + found[i]->begin), SEEK_SET) != 0 ||
                 fread(bufs[i], 1, nbytes, f) != nbytes)
            s = tc_error_set(TC_ERR_IO, "%s: reading %s from %s failed", j->api, names[i], j->path);
    }
    tc_free(found);
    return s;
}

/* uploads bufs[i] and assigns it to ts[i] for every i, then realizes them together */
TC_MUST_USE static tc_status assign_all(tc_tensor **ts, int n, void **bufs) {
    for (int i = 0; i < n; i++) {
        tc_tensor *v = tc_from_data(bufs[i], tc_get_dtype(ts[i]), tc_ndim(ts[i]), tc_shape(ts[i]),
                                    tc_device(ts[i]));
        tc_status s = v ? tc_assign(ts[i], v) : tc_last_status();
        tc_release(v);
        if (s != TC_OK) return s;
    }
    return tc_realize(ts, n);
}

TC_MUST_USE tc_status tc_safe_load_into(const char *api, const char *path, const char *const *names,
                            tc_tensor **ts, int n, bool strict) {
    tc_status s = check_named(api, path, names, ts, n);
    if (s != TC_OK) return s;
    FILE *f = fopen(path, "rb");
    if (!f) return tc_error_set(TC_ERR_IO, "%s: cannot open %s: %s", api, path, strerror(errno));
    st_parser j = {.api = api, .path = path};
    void **bufs = tc_calloc((size_t)n + 1, sizeof *bufs);
    s = bufs ? read_data(f, &j, names, ts, n, strict, bufs) : TC_ERR_MEMORY;
    fclose(f);
    if (s == TC_OK) s = assign_all(ts, n, bufs);
    for (int i = 0; bufs && i < n; i++) tc_free(bufs[i]);
    tc_free(bufs);
    for (int i = 0; i < j.n_entries; i++) tc_free(j.entries[i].name);
    tc_free(j.entries);
    return s;
}

TC_API tc_status tc_safe_load(const char *path, const char *const *names, tc_tensor **ts, int n) {
    TC_API_ENTER();
    return tc_safe_load_into("tc_safe_load", path, names, ts, n, false);
}
