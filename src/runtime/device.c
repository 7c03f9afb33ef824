/* device.c - the device table, device names, buffers and copies.
 *
 * Input: device names from the user ("CPU", "cpu:0", "NULL" (null.c), NULL =
 * TC_DEVICE or CPU) and buffer requests from the engine. Output: device ids (indices into
 * a fixed, process-wide table of opened devices; id 0 is always CPU) and
 * refcounted tc_buffers whose release frees the device memory and the
 * struct. The table owns the devices; tc_runtime_shutdown closes them all.
 * How many OpenCL and CUDA devices exist is asked of their drivers once (and
 * again after tc_runtime_shutdown).
 * Callers hold the API lock (tc_lock), so nothing here locks on its own.
 */
#include "runtime/runtime.h"

#include <stdlib.h>
#include <string.h>
#include <strings.h>

#define MAX_DEVICES 16 /* slots in the device table */

typedef enum {
    KIND_CPU,    /* the host: always available */
    KIND_OPENCL, /* OpenCL through the ICD loader (opencl.c) */
    KIND_CUDA,   /* CUDA driver API + NVRTC, both dlopen'ed (cuda.c) */
    KIND_NULL,   /* renders kernels, builds and runs nothing (null.c): always available */
    KIND_COUNT
} device_kind;

/* the count of CPU and NULL: one, always */
static int one_count(char *why, size_t why_size) {
    (void)why, (void)why_size;
    return 1;
}

static tc_dev *cpu_create(int id, int index) {
    (void)index;
    return tc_cpu_device_create(id);
}

static tc_dev *null_create(int id, int index) {
    (void)index;
    return tc_null_device_create(id);
}

typedef struct {
    const char *name;                        /* canonical spelling, matched case-insensitively */
    int (*count)(char *why, size_t why_size); /* devices of this kind (0: why says why) */
    tc_dev *(*create)(int id, int index);    /* opens device `index` as table slot id */
} kind_info;

static const kind_info kinds[KIND_COUNT] = {
    [KIND_CPU] = {"CPU", one_count, cpu_create},
    [KIND_OPENCL] = {"OPENCL", tc_opencl_count, tc_opencl_device_create},
    [KIND_CUDA] = {"CUDA", tc_cuda_count, tc_cuda_device_create},
    [KIND_NULL] = {"NULL", one_count, null_create},
};

static tc_dev *devices[MAX_DEVICES]; /* opened devices by id; NULL = free slot */
static int kind_count[KIND_COUNT];   /* devices per kind, -1 = not asked yet (see counts) */
static char kind_why[KIND_COUNT][160]; /* why a kind has no device */
static bool is_counted;              /* kind_count holds answers */
static uint64_t openings;            /* devices opened so far: the last tc_dev.serial given */

/* the number of devices of kind k (asked once) */
static int count_of(device_kind k) {
    if (!is_counted)
        for (int i = 0; i < KIND_COUNT; i++) kind_count[i] = -1;
    is_counted = true;
    if (kind_count[k] < 0) {
        kind_why[k][0] = '\0';
        kind_count[k] = kinds[k].count(kind_why[k], sizeof kind_why[k]);
        if (kind_count[k] < 0) kind_count[k] = 0;
    }
    return kind_count[k];
}

/* ---- names ---------------------------------------------------------------- */

/* parses "KIND" or "KIND:N" (kind case-insensitive, N decimal digits).
 * Returns 0 and sets *kind, *index; -1 if the kind is unknown; -2 if the
 * kind is known but the index is malformed. */
static int parse_name(const char *name, device_kind *kind, int *index) {
    const char *colon = strchr(name, ':');
    size_t klen = colon ? (size_t)(colon - name) : strlen(name);
    int k = 0;
    while (k < KIND_COUNT &&
           !(strlen(kinds[k].name) == klen && strncasecmp(kinds[k].name, name, klen) == 0))
        k++;
    if (k == KIND_COUNT) return -1;
    *kind = (device_kind)k;
    *index = 0;
    if (!colon) return 0;
    const char *p = colon + 1;
    if (*p == '\0' || strlen(p) > 6) return -2;
    for (; *p; p++) {
        if (*p < '0' || *p > '9') return -2;
        *index = *index * 10 + (*p - '0');
    }
    return 0;
}

/* canonical name: "CPU", "OPENCL", "OPENCL:1" (index 0 is left out) */
static void canonical_name(char out[32], device_kind kind, int index) {
    if (index == 0) snprintf(out, 32, "%s", kinds[kind].name);
    else snprintf(out, 32, "%s:%d", kinds[kind].name, index);
}

/* the id of the opened device called `canon`, or -1 */
static int find_open(const char *canon) {
    for (int i = 0; i < MAX_DEVICES; i++)
        if (devices[i] && strcmp(devices[i]->name, canon) == 0) return i;
    return -1;
}

/* reports a bad name; `from` says where it came from ("" or " (from TC_DEVICE)") */
static int name_error(const char *api, const char *name, const char *from, int why) {
    if (why == -1)
        tc_error_set(TC_ERR_DEVICE,
                     "%s: unknown device '%.64s'%s (known: CPU, OPENCL, CUDA, NULL)", api, name,
                     from);
    else
        tc_error_set(TC_ERR_DEVICE,
                     "%s: bad device name '%.64s'%s (expected CPU, OPENCL, CUDA or NULL, with "
                     "an optional :N index)",
                     api, name, from);
    return -1;
}

/* makes device `index` of `kind` and puts it in a free slot; CPU always takes 0 */
static int create_device(device_kind kind, int index, const char *api) {
    int id = kind == KIND_CPU ? 0 : 1;
    while (id < MAX_DEVICES && devices[id]) id++;
    if (id >= MAX_DEVICES) {
        tc_error_set(TC_ERR_DEVICE, "%s: too many open devices (at most %d)", api, MAX_DEVICES);
        return -1;
    }
    tc_dev *d = kinds[kind].create(id, index);
    if (!d) { /* the constructor said why; the message gets the caller's name */
        if (tc_error_code() == TC_ERR_DEVICE) {
            char why[400];
            snprintf(why, sizeof why, "%s", tc_last_error());
            tc_error_set(TC_ERR_DEVICE, "%s: %s", api, why);
        }
        return -1;
    }
    d->serial = ++openings;
    devices[id] = d;
    return id;
}

int tc_device_open(const char *name, const char *api) {
    const char *from = "";
    if (!api) api = "tc_device_open";
    if (!name) {
        const char *env = getenv("TC_DEVICE");
        name = env && *env ? env : "CPU";
        if (env && *env) from = " (from TC_DEVICE)";
    }
    device_kind kind;
    int index;
    int rc = parse_name(name, &kind, &index);
    if (rc != 0) return name_error(api, name, from, rc);
    char canon[32];
    canonical_name(canon, kind, index);
    int id = find_open(canon);
    if (id >= 0) return id;
    int n = count_of(kind);
    if (n == 0) {
        tc_error_set(TC_ERR_DEVICE, "%s: device %s is not available (%s)", api, kinds[kind].name,
                     kind_why[kind][0] ? kind_why[kind] : "no device found");
        return -1;
    }
    if (index >= n) {
        const kind_info *k = &kinds[kind];
        char have[64];
        if (n == 1) snprintf(have, sizeof have, "only %s:0", k->name);
        else snprintf(have, sizeof have, "%s:0 to %s:%d", k->name, k->name, n - 1);
        tc_error_set(TC_ERR_DEVICE, "%s: device '%.64s'%s does not exist (there is %s)", api, name,
                     from, have);
        return -1;
    }
    return create_device(kind, index, api);
}

tc_dev *tc_device_get(int id) {
    if (id < 0 || id >= MAX_DEVICES || !devices[id]) {
        tc_error_set(TC_ERR_DEVICE, "tc_device_get: no open device with id %d", id);
        return NULL;
    }
    return devices[id];
}

void tc_runtime_shutdown(void) {
    tc_runtime_trim();
    for (int i = 0; i < MAX_DEVICES; i++) {
        if (!devices[i]) continue;
        tc_dev *d = devices[i];
        devices[i] = NULL;
        d->close(d);
    }
    is_counted = false; /* ask the drivers again next time */
}

/* ---- buffers and the buffer cache ------------------------------------------
 * A released buffer's device memory is kept in the cache for the next buffer
 * of its size class on its device instead of going back to the device (a
 * training step allocates the same sizes every step; on the CPU a fresh
 * block also costs page faults). Size classes: 64-byte steps up to 4 KiB,
 * then eighths of the power of two below the size, so a block is at most
 * 12.5% larger than asked. The cache holds at most TC_BUFCACHE_MB megabytes
 * (default 1024; 0 turns it off), dropping its oldest blocks first; it is
 * emptied by tc_runtime_trim, tc_runtime_shutdown, and before an allocation
 * that failed is tried again. The cache owns the blocks it holds. A device
 * that pools blocks of some size itself (pool_min: the CPU's heap, for the
 * many sizes of a step's big buffers) gets those straight back. */

typedef struct {
    int device;  /* where the block lives */
    size_t size; /* its size class in bytes */
    void *ptr;   /* device memory */
} cached_block;

static cached_block *cache;        /* oldest first */
static int cache_n, cache_cap;     /* blocks held, slots allocated */
static int64_t cache_bytes;        /* bytes held */
static int64_t mem_used, mem_peak; /* bytes in live buffers, the most since the last reset */

void tc_runtime_mem(int64_t *used, int64_t *peak, int64_t *cached) {
    *used = mem_used;
    *peak = mem_peak;
    *cached = cache_bytes;
}

void tc_runtime_mem_reset_peak(void) {
    mem_peak = mem_used;
}

/* the size class of a request: what is allocated, and what a cached block
 * must have to serve it */
static size_t size_class(size_t n) {
    if (n <= 4096) return (n + 63) & ~(size_t)63;
    size_t top = (size_t)1 << (63 - __builtin_clzll((unsigned long long)n)); /* <= n */
    size_t step = top / 8;
    return n > SIZE_MAX - step ? n : (n + step - 1) / step * step;
}

int64_t tc_runtime_cache_limit(void) {
    const char *e = getenv("TC_BUFCACHE_MB");
    long long mb = e && *e ? strtoll(e, NULL, 10) : 1024;
    return mb <= 0 ? 0 : mb > ((int64_t)1 << 40) ? INT64_MAX : (int64_t)mb << 20;
}

/* under ASan a cached CPU block is poisoned: a use after release still fails */
#if defined(__SANITIZE_ADDRESS__)
#include <sanitizer/asan_interface.h>
#define POISON(dev, p, n)   ((dev) == 0 && (n) ? ASAN_POISON_MEMORY_REGION((p), (n)) : (void)0)
#define UNPOISON(dev, p, n) ((dev) == 0 && (n) ? ASAN_UNPOISON_MEMORY_REGION((p), (n)) : (void)0)
#else
#define POISON(dev, p, n)   ((void)0)
#define UNPOISON(dev, p, n) ((void)0)
#endif

/* gives cached block i back to its device */
static void cache_drop(int i) {
    cached_block *c = &cache[i];
    tc_dev *d = c->device >= 0 && c->device < MAX_DEVICES ? devices[c->device] : NULL;
    UNPOISON(c->device, c->ptr, c->size);
    if (d) d->free(d, c->ptr);
    cache_bytes -= (int64_t)c->size;
    memmove(c, c + 1, sizeof *c * (size_t)(cache_n - i - 1));
    cache_n--;
}

/* empties the cache of device (-1: of every device); returns the bytes freed */
static int64_t cache_trim(int device) {
    int64_t before = cache_bytes;
    for (int i = cache_n - 1; i >= 0; i--)
        if (device < 0 || cache[i].device == device) cache_drop(i);
    if (cache_n == 0) {
        tc_free(cache);
        cache = NULL;
        cache_cap = 0;
    }
    return before - cache_bytes;
}

void tc_runtime_trim(void) {
    cache_trim(-1);
    for (int i = 0; i < MAX_DEVICES; i++)
        if (devices[i] && devices[i]->trim) devices[i]->trim(devices[i]);
}

/* whether d pools blocks of nbytes itself (not cached, not rounded) */
static bool pooled(const tc_dev *d, size_t nbytes) {
    return d->pool_min && nbytes >= d->pool_min;
}

/* a cached block of size class `size` on device, taken out of the cache; NULL if none */
static void *cache_take(int device, size_t size) {
    for (int i = cache_n - 1; i >= 0; i--) { /* the newest: likely still in the CPU's caches */
        if (cache[i].device != device || cache[i].size != size) continue;
        void *p = cache[i].ptr;
        UNPOISON(device, p, size);
        cache_bytes -= (int64_t)size;
        memmove(&cache[i], &cache[i + 1], sizeof *cache * (size_t)(cache_n - i - 1));
        cache_n--;
        return p;
    }
    return NULL;
}

/* keeps a released block; false when it is not kept (the caller frees it) */
static bool cache_put(int device, void *ptr, size_t size) {
    int64_t limit = tc_runtime_cache_limit();
    if (size == 0 || (int64_t)size > limit) return false;
    while (cache_n > 0 && cache_bytes + (int64_t)size > limit) cache_drop(0);
    if (cache_n == cache_cap) {
        int cap = cache_cap ? cache_cap * 2 : 64;
        tc_error_state es;
        tc_error_save(&es);
        cached_block *c = tc_realloc(cache, sizeof *c * (size_t)cap);
        if (!c) {
            tc_error_restore(&es); /* not an error: the block goes back to the device */
            return false;
        }
        cache = c;
        cache_cap = cap;
    }
    POISON(device, ptr, size);
    cache[cache_n++] = (cached_block){device, size, ptr};
    cache_bytes += (int64_t)size;
    return true;
}

/* nbytes of memory on device d (id `device`): a cached block of their size
 * class, or the device's; NULL with an error set */
static void *device_memory(tc_dev *d, int device, size_t nbytes) {
    size_t size = pooled(d, nbytes) ? nbytes : size_class(nbytes);
    void *p = pooled(d, nbytes) ? NULL : cache_take(device, size);
    if (p) return p;
    tc_error_state es;
    tc_error_save(&es);
    p = d->alloc(d, size);
    if (!p && cache_trim(device) > 0) { /* out of memory: give the cache back, retry */
        p = d->alloc(d, size);
        if (p) tc_error_restore(&es);
    }
    return p;
}

/* b's memory back to the cache or its device; b->ptr NULL after. A buffer
 * that outlives its device (tc_runtime_shutdown while tensors live, which
 * the API forbids) cannot give its memory back. */
static void give_back(tc_buffer *b) {
    tc_dev *d = b->device >= 0 && b->device < MAX_DEVICES ? devices[b->device] : NULL;
    if (d && (pooled(d, b->nbytes) || !cache_put(b->device, b->ptr, size_class(b->nbytes))))
        d->free(d, b->ptr);
    mem_used -= (int64_t)b->nbytes;
    b->ptr = NULL;
}

/* the release hook of every runtime buffer (a dropped one has no memory) */
static void buffer_release(tc_buffer *b) {
    if (b->ptr) give_back(b);
    tc_free(b);
}

/* the drop hook: the memory goes, the buffer stays (graph.c says when) */
static void buffer_drop(tc_buffer *b) {
    give_back(b);
    b->droppable = false;
}

static void count_used(size_t nbytes) {
    mem_used += (int64_t)nbytes;
    if (mem_used > mem_peak) mem_peak = mem_used;
}

tc_buffer *tc_buffer_new(int device, size_t nbytes) {
    tc_dev *d = tc_device_get(device);
    if (!d) return NULL;
    tc_buffer *b = tc_calloc(1, sizeof *b);
    if (!b) return NULL;
    if (!(b->ptr = device_memory(d, device, nbytes))) {
        tc_free(b);
        return NULL;
    }
    b->refcount = 1;
    b->device = device;
    b->nbytes = nbytes;
    b->release = buffer_release;
    b->drop = buffer_drop;
    count_used(nbytes);
    return b;
}

TC_MUST_USE tc_status tc_buffer_restore(tc_buffer *b) {
    if (b->ptr) return TC_OK;
    tc_dev *d = tc_device_get(b->device);
    if (!d || !(b->ptr = device_memory(d, b->device, b->nbytes))) return tc_error_or(TC_ERR_MEMORY);
    count_used(b->nbytes);
    return TC_OK;
}

/* checks that [offset, offset+nbytes) lies inside b and that the host
 * pointer is usable; `api` and `host` name the call and the pointer */
TC_MUST_USE static tc_status check_range(const char *api, const tc_buffer *b, size_t offset, size_t nbytes,
                             const void *host) {
    if (!b) return tc_error_set(TC_ERR_INVALID, "%s: buffer is NULL", api);
    if (!host && nbytes > 0)
        return tc_error_set(TC_ERR_INVALID, "%s: host pointer is NULL for %zu bytes", api, nbytes);
    if (offset > b->nbytes || nbytes > b->nbytes - offset)
        return tc_error_set(TC_ERR_INVALID,
                            "%s: range [%zu, %zu + %zu) is outside the buffer of %zu bytes", api,
                            offset, offset, nbytes, b->nbytes);
    if (!tc_device_get(b->device))
        return tc_error_set(TC_ERR_DEVICE, "%s: the buffer's device %d is not open", api,
                            b->device);
    return TC_OK;
}

TC_MUST_USE tc_status tc_buffer_copyin(tc_buffer *b, size_t offset, const void *src, size_t nbytes) {
    tc_status st = check_range("tc_buffer_copyin", b, offset, nbytes, src);
    if (st != TC_OK || nbytes == 0) return st;
    tc_dev *d = tc_device_get(b->device);
    return d->copyin(d, b->ptr, offset, src, nbytes);
}

TC_MUST_USE tc_status tc_buffer_copyout(tc_buffer *b, size_t offset, void *dst, size_t nbytes) {
    tc_status st = check_range("tc_buffer_copyout", b, offset, nbytes, dst);
    if (st != TC_OK || nbytes == 0) return st;
    tc_dev *d = tc_device_get(b->device);
    return d->copyout(d, dst, b->ptr, offset, nbytes);
}

/* Copies between two devices. One side on the host (CPU, id 0) is a single
 * copyin/copyout by the other side; otherwise the bytes travel through a
 * host staging buffer. */
TC_MUST_USE tc_status tc_buffer_copy(tc_buffer *dst, tc_buffer *src, size_t nbytes) {
    const char *api = "tc_buffer_copy";
    if (!dst || !src)
        return tc_error_set(TC_ERR_INVALID, "%s: %s buffer is NULL", api,
                            dst ? "source" : "destination");
    if (nbytes > dst->nbytes || nbytes > src->nbytes)
        return tc_error_set(TC_ERR_INVALID,
                            "%s: %zu bytes do not fit (destination %zu bytes, source %zu bytes)",
                            api, nbytes, dst->nbytes, src->nbytes);
    tc_dev *dd = tc_device_get(dst->device), *sd = tc_device_get(src->device);
    if (!dd || !sd)
        return tc_error_set(TC_ERR_DEVICE, "%s: the %s buffer's device is not open", api,
                            dd ? "source" : "destination");
    if (nbytes == 0 || dst == src) return TC_OK;
    if (sd->id == 0) return dd->copyin(dd, dst->ptr, 0, src->ptr, nbytes);
    if (dd->id == 0) return sd->copyout(sd, dst->ptr, src->ptr, 0, nbytes);
    void *tmp = tc_malloc(nbytes);
    if (!tmp) return TC_ERR_MEMORY;
    tc_status st = sd->copyout(sd, tmp, src->ptr, 0, nbytes); /* returns with the bytes in tmp */
    if (st == TC_OK) st = dd->copyin(dd, dst->ptr, 0, tmp, nbytes);
    if (st == TC_OK) st = dd->synchronize(dd); /* copyin may still read tmp */
    tc_free(tmp);
    return st;
}
