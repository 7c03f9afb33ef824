/* cpu_heap.c - where the CPU device keeps its big buffers: large anonymous
 * mappings (regions) cut into blocks, best fit, a freed block merged with
 * the free blocks beside it. Blocks of different sizes share memory as
 * their lives allow, and a freed block stays mapped for the next one.
 *
 * Why not malloc and a cache of freed blocks by size class (what the
 * other devices get, device.c): a training step's transient buffers come
 * in many sizes, so a block freed at one size waits for a buffer of that
 * size while buffers of other sizes take new memory, and the process
 * holds the sum of every size's high mark (ResNet-18, batch 16: 380 MB
 * resident against a live peak of 288). Without the cache, glibc maps
 * each big block afresh and unmaps it when freed, and every step pays
 * its page faults again (the same step 0.7 -> 1.5-2.5 s on a 2-core
 * guest). Here the memory a step touches is its live peak plus what the
 * fit leaves between blocks, and a step in the steady state faults
 * nothing.
 *
 * A region is at least REGION_MIN bytes of address space: its pages become
 * resident when first written, so the untouched end of a region costs
 * nothing (a request bigger than the OS can back fails at its mmap, as
 * malloc's would). A region asks for transparent huge pages
 * (MADV_HUGEPAGE; Linux's default THP setting, "madvise", gives them only
 * to mappings that ask): a buffer's first write then faults once per 2 MiB
 * instead of once per 4 KiB page. The first step of a training loop writes
 * all its memory for the first time, and where a fault is dear (a 2-core
 * Zen 5 guest: 300 MB touched a page at a time in 830-870 ms, 21-540 ms
 * with huge pages, the range being how many the kernel had free) that was
 * most of the first step's launch time: beautiful_mnist's cold step (292
 * MB peak, 186 ms warm) launched its kernels in 684-821 ms, 437-598 ms
 * with huge pages (alternate runs of the two builds). The cost: a region's used end rounds up to 2 MiB of
 * resident memory, once per region. Best fit (the smallest free block that
 * holds the request; of those, the lowest address, oldest region first)
 * keeps the used pages low and together.
 * Cost: an allocation scans the free blocks of every region, a free
 * finds its region by address and its block by binary search, then
 * merges in O(blocks in the region): linear in the blocks, a few hundred
 * in a training step. Single-threaded, as the device's callers are.
 */
#include "runtime/cpu.h"

#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#define HEAP_ALIGN   64                  /* alignment and granule of a block */
#define REGION_MIN   ((size_t)64 << 20)  /* address space a region reserves, at least */
#define REGION_ROUND ((size_t)2 << 20)   /* a bigger region: its request rounded up to this */

struct tc_cpu_hblock {
    size_t off;  /* from the region's base */
    size_t size; /* bytes, a multiple of HEAP_ALIGN */
    bool used;
};

static size_t round_up(size_t n, size_t to) {
    return (n + to - 1) / to * to;
}

/* inserts a block at index at of region r; false on out of memory */
static bool insert_block(tc_cpu_region *r, int at, tc_cpu_hblock b) {
    if (r->n == r->cap) {
        int cap = r->cap ? 2 * r->cap : 16;
        tc_cpu_hblock *nb = tc_realloc(r->blocks, sizeof *nb * (size_t)cap);
        if (!nb) return false;
        r->blocks = nb, r->cap = cap;
    }
    memmove(&r->blocks[at + 1], &r->blocks[at], sizeof *r->blocks * (size_t)(r->n - at));
    r->blocks[at] = b;
    r->n++;
    return true;
}

static void remove_block(tc_cpu_region *r, int at) {
    memmove(&r->blocks[at], &r->blocks[at + 1], sizeof *r->blocks * (size_t)(r->n - at - 1));
    r->n--;
}

/* a new region of at least n bytes, one free block; NULL on out of memory */
static tc_cpu_region *add_region(tc_cpu_heap *h, size_t n) {
    if (h->n == h->cap) {
        int cap = h->cap ? 2 * h->cap : 4;
        tc_cpu_region *nr = tc_realloc(h->regions, sizeof *nr * (size_t)cap);
        if (!nr) return NULL;
        h->regions = nr, h->cap = cap;
    }
    size_t size = n > REGION_MIN - REGION_ROUND ? round_up(n, REGION_ROUND) : REGION_MIN;
    if (size < n) return NULL; /* wrapped: no such region */
    tc_cpu_region r = {.size = size};
    r.base = tc_map(size);
    if (!r.base) return NULL;
    madvise(r.base, size, MADV_HUGEPAGE); /* advice: a kernel without THP ignores it */
    if (!insert_block(&r, 0, (tc_cpu_hblock){0, size, false})) {
        tc_unmap(r.base, size);
        return NULL;
    }
    h->regions[h->n] = r;
    h->mapped += size;
    return &h->regions[h->n++];
}

void *tc_cpu_heap_alloc(tc_cpu_heap *h, size_t nbytes) {
    if (nbytes > SIZE_MAX - REGION_ROUND) {
        tc_error_set(TC_ERR_MEMORY, "CPU: cannot allocate %zu bytes", nbytes);
        return NULL;
    }
    size_t n = round_up(nbytes ? nbytes : 1, HEAP_ALIGN);
    tc_cpu_region *best_r = NULL;
    int best = -1;
    for (int i = 0; i < h->n; i++) {
        tc_cpu_region *r = &h->regions[i];
        for (int k = 0; k < r->n; k++) {
            const tc_cpu_hblock *b = &r->blocks[k];
            if (b->used || b->size < n || (best_r && b->size >= best_r->blocks[best].size)) continue;
            best_r = r, best = k;
        }
    }
    if (!best_r) {
        if (!(best_r = add_region(h, n))) return NULL;
        best = 0;
    }
    tc_cpu_hblock *b = &best_r->blocks[best];
    if (b->size > n) { /* the rest stays free, after it */
        tc_cpu_hblock rest = {b->off + n, b->size - n, false};
        if (!insert_block(best_r, best + 1, rest)) return NULL;
        b = &best_r->blocks[best]; /* the array may have moved */
        b->size = n;
    }
    b->used = true;
    h->used += n;
    return best_r->base + b->off;
}

/* unmaps region i of h */
static void drop_region(tc_cpu_heap *h, int i) {
    tc_cpu_region *r = &h->regions[i];
    tc_unmap(r->base, r->size);
    tc_free(r->blocks);
    h->mapped -= r->size;
    memmove(r, r + 1, sizeof *r * (size_t)(h->n - i - 1));
    h->n--;
}

bool tc_cpu_heap_free(tc_cpu_heap *h, void *ptr, size_t keep) {
    char *p = ptr;
    for (int i = 0; i < h->n; i++) {
        tc_cpu_region *r = &h->regions[i];
        if (p < r->base || p >= r->base + r->size) continue;
        size_t off = (size_t)(p - r->base);
        int lo = 0, hi = r->n - 1; /* the block starting at off */
        while (lo < hi) {
            int mid = (lo + hi + 1) / 2;
            if (r->blocks[mid].off <= off) lo = mid;
            else hi = mid - 1;
        }
        tc_cpu_hblock *b = &r->blocks[lo];
        if (b->off != off || !b->used) return false; /* not a block this heap gave out */
        b->used = false;
        h->used -= b->size;
        if (lo + 1 < r->n && !r->blocks[lo + 1].used) { /* merge the next one in */
            b->size += r->blocks[lo + 1].size;
            remove_block(r, lo + 1);
        }
        if (lo > 0 && !r->blocks[lo - 1].used) { /* merge into the one before */
            r->blocks[lo - 1].size += b->size;
            remove_block(r, lo);
        }
        if (r->n == 1 && h->mapped - h->used > keep) drop_region(h, i);
        return true;
    }
    return false;
}

void tc_cpu_heap_trim(tc_cpu_heap *h) {
    size_t page = (size_t)sysconf(_SC_PAGESIZE);
    for (int i = h->n - 1; i >= 0; i--) {
        tc_cpu_region *r = &h->regions[i];
        if (r->n == 1 && !r->blocks[0].used) { /* all free: give it back */
            drop_region(h, i);
            continue;
        }
        for (int k = 0; k < r->n; k++) { /* the whole pages of free blocks */
            const tc_cpu_hblock *b = &r->blocks[k];
            size_t from = round_up(b->off, page), to = (b->off + b->size) / page * page;
            if (!b->used && to > from) madvise(r->base + from, to - from, MADV_DONTNEED);
        }
    }
}

void tc_cpu_heap_release(tc_cpu_heap *h) {
    for (int i = 0; i < h->n; i++) {
        tc_cpu_region *r = &h->regions[i];
        bool in_use = false;
        for (int k = 0; k < r->n && !in_use; k++) in_use = r->blocks[k].used;
        if (!in_use) tc_unmap(r->base, r->size); /* else it stays, as its buffers' memory */
        tc_free(r->blocks);
    }
    tc_free(h->regions);
    *h = (tc_cpu_heap){0};
}
