/* mem.c - the library allocator (with a test hook that fails the Nth
 * allocation), mappings for the CPU device's heap, arenas for
 * per-kernel compile-time data, and growable arrays. */
#include "util.h"

#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>

static _Atomic int64_t fail_countdown; /* > 0: allocations left before one fails */

void tc_mem_fail_after(int64_t n) {
    fail_countdown = n;
}

static bool should_fail(void) {
    if (fail_countdown <= 0) return false;
    return --fail_countdown == 0;
}

static void *oom(size_t n) {
    tc_error_set(TC_ERR_MEMORY, "out of memory allocating %zu bytes", n);
    return NULL;
}

void *tc_malloc(size_t n) {
    if (should_fail()) return oom(n);
    void *p = malloc(n ? n : 1);
    return p ? p : oom(n);
}

void *tc_calloc(size_t count, size_t size) {
    if (should_fail()) return oom(count * size);
    void *p = calloc(count ? count : 1, size ? size : 1);
    return p ? p : oom(count * size);
}

void *tc_realloc(void *p, size_t n) {
    if (should_fail()) return oom(n);
    void *q = realloc(p, n ? n : 1);
    return q ? q : oom(n);
}

void tc_free(void *p) {
    free(p);
}

void *tc_map(size_t n) {
    if (should_fail()) return oom(n);
    void *p = mmap(NULL, n ? n : 1, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    return p != MAP_FAILED ? p : oom(n);
}

void tc_unmap(void *p, size_t n) {
    if (p) munmap(p, n ? n : 1);
}

char *tc_strdup(const char *s) {
    size_t n = strlen(s) + 1;
    char *d = tc_malloc(n);
    if (d) memcpy(d, s, n);
    return d;
}

/* ---- arena ---- */
struct tc_arena_block {
    tc_arena_block *next; /* older block */
    size_t used;          /* bytes handed out from data */
    size_t cap;           /* bytes in data */
    _Alignas(16) unsigned char data[];
};

void *tc_arena_alloc(tc_arena *a, size_t n) {
    n = (n + 15) & ~(size_t)15;
    tc_arena_block *b = a->head;
    if (!b || b->cap - b->used < n) {
        size_t cap = n > 65536 ? n : 65536;
        b = tc_malloc(sizeof *b + cap);
        if (!b) return NULL;
        b->next = a->head;
        b->used = 0;
        b->cap = cap;
        a->head = b;
    }
    void *p = b->data + b->used;
    b->used += n;
    memset(p, 0, n);
    return p;
}

char *tc_arena_strdup(tc_arena *a, const char *s) {
    size_t n = strlen(s) + 1;
    char *d = tc_arena_alloc(a, n);
    if (d) memcpy(d, s, n);
    return d;
}

void tc_arena_free(tc_arena *a) {
    tc_arena_block *b = a->head;
    while (b) {
        tc_arena_block *next = b->next;
        tc_free(b);
        b = next;
    }
    a->head = NULL;
}

/* ---- pointer vector ---- */
TC_MUST_USE tc_status tc_ptrvec_push(tc_ptrvec *v, void *p) {
    if (v->n == v->cap) {
        int cap = v->cap ? v->cap * 2 : 8;
        void **items = tc_realloc(v->items, sizeof(void *) * (size_t)cap);
        if (!items) return TC_ERR_MEMORY;
        v->items = items;
        v->cap = cap;
    }
    v->items[v->n++] = p;
    return TC_OK;
}

void tc_ptrvec_free(tc_ptrvec *v) {
    tc_free(v->items);
    v->items = NULL;
    v->n = v->cap = 0;
}
