/* test_cpu_heap.c - the CPU device's heap of big buffers (runtime/
 * cpu_heap.c): best fit, splitting and merging, blocks the heap did not give
 * out, a request bigger than a region, trimming (free pages given back,
 * empty regions unmapped), the bound on the free memory kept, out of
 * memory, regions open to huge pages; and the device using it: a big
 * buffer's memory serves the next big buffer of any size, not through the
 * size-class cache. */
#include "tc_test.h"

#include "runtime/cpu.h"

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define KB ((size_t)1 << 10)
#define MB ((size_t)1 << 20)
#define ALL SIZE_MAX /* keep every free region */

/* a free block is reused by the best fitting request, freed neighbours
 * merge into one block that a bigger request then fits */
static void test_fit_and_merge(void **state) {
    (void)state;
    tc_cpu_heap h = {0};
    char *a = tc_cpu_heap_alloc(&h, 100000), *b = tc_cpu_heap_alloc(&h, 200000),
         *c = tc_cpu_heap_alloc(&h, 100000);
    assert_non_null(a);
    assert_non_null(b);
    assert_non_null(c);
    assert_int_equal((uintptr_t)a % 64, 0);
    assert_ptr_equal(b, a + 100032); /* 100000 rounded up to 64 bytes, then the next */
    assert_ptr_equal(c, b + 200000);
    assert_int_equal(h.n, 1);
    assert_int_equal(h.used, 100032 + 200000 + 100032);
    memset(a, 1, 100000), memset(b, 2, 200000), memset(c, 3, 100000);
    assert_true(tc_cpu_heap_free(&h, b, ALL));
    char *d = tc_cpu_heap_alloc(&h, 150000); /* b's hole fits it better than the region's end */
    assert_ptr_equal(d, b);
    char *e = tc_cpu_heap_alloc(&h, 50000); /* d left 49984 bytes of the hole: too few */
    assert_ptr_equal(e, c + 100032);
    assert_true(tc_cpu_heap_free(&h, a, ALL));
    assert_true(tc_cpu_heap_free(&h, d, ALL)); /* merges with a before it and the rest after it */
    char *f = tc_cpu_heap_alloc(&h, 300000);
    assert_ptr_equal(f, a);
    assert_int_equal(c[0], 3); /* c untouched through it all */
    assert_int_equal(c[99999], 3);
    assert_true(tc_cpu_heap_free(&h, f, ALL));
    assert_true(tc_cpu_heap_free(&h, c, ALL));
    assert_true(tc_cpu_heap_free(&h, e, ALL));
    assert_int_equal(h.used, 0);
    assert_int_equal(h.regions[0].n, 1); /* all merged back into one free block */
    tc_cpu_heap_release(&h);
    assert_int_equal(h.n, 0);
}

/* what the heap did not give out, or gave out and got back, is not freed */
static void test_foreign_blocks(void **state) {
    (void)state;
    tc_cpu_heap h = {0};
    int local;
    assert_false(tc_cpu_heap_free(&h, &local, ALL)); /* no region yet */
    char *a = tc_cpu_heap_alloc(&h, 1000);
    assert_non_null(a);
    void *m = malloc(64);
    assert_false(tc_cpu_heap_free(&h, m, ALL));
    free(m);
    assert_false(tc_cpu_heap_free(&h, a + 64, ALL)); /* inside a block */
    assert_false(tc_cpu_heap_free(&h, a + 4096, ALL)); /* inside the free rest */
    assert_true(tc_cpu_heap_free(&h, a, ALL));
    assert_false(tc_cpu_heap_free(&h, a, ALL)); /* twice */
    assert_int_equal(h.used, 0);
    tc_cpu_heap_release(&h);
}

/* a request past a region's size gets a region of its own; trimming gives
 * a free block's pages back (they read as zero when used again) and
 * unmaps the regions with nothing in use */
static void test_big_and_trim(void **state) {
    (void)state;
    tc_cpu_heap h = {0};
    char *small = tc_cpu_heap_alloc(&h, 64 * KB), *mid = tc_cpu_heap_alloc(&h, 4 * MB);
    char *big = tc_cpu_heap_alloc(&h, 100 * MB);
    assert_non_null(small);
    assert_non_null(mid);
    assert_non_null(big);
    assert_int_equal(h.n, 2);
    assert_true(h.regions[1].size >= 100 * MB);
    big[0] = 1, big[100 * MB - 1] = 2; /* both ends usable */
    memset(mid, 7, 4 * MB);
    assert_true(tc_cpu_heap_free(&h, big, ALL));
    assert_true(tc_cpu_heap_free(&h, mid, ALL));
    tc_cpu_heap_trim(&h);
    assert_int_equal(h.n, 1); /* big's region is gone; small's stays */
    char *again = tc_cpu_heap_alloc(&h, 4 * MB);
    assert_ptr_equal(again, mid);
    assert_int_equal(again[2 * MB], 0); /* a page trimming gave back */
    assert_true(tc_cpu_heap_free(&h, again, ALL));
    assert_true(tc_cpu_heap_free(&h, small, ALL));
    tc_cpu_heap_trim(&h);
    assert_int_equal(h.n, 0);
    tc_cpu_heap_release(&h);
}

/* the first word of file path, or "" */
static void read_word(const char *path, char *w, size_t n) {
    FILE *f = fopen(path, "r");
    w[0] = 0;
    if (f && !fgets(w, (int)n, f)) w[0] = 0;
    if (f) fclose(f);
}

/* "THPeligible" of the mapping holding p in /proc/self/smaps: 1, 0, or -1
 * when smaps does not say */
static int thp_eligible(const void *p) {
    FILE *f = fopen("/proc/self/smaps", "r");
    if (!f) return -1;
    char line[512];
    int in = 0, v = -1;
    unsigned long lo, hi, a = (unsigned long)(uintptr_t)p;
    while (fgets(line, sizeof line, f)) {
        if (sscanf(line, "%lx-%lx ", &lo, &hi) == 2 && strchr(line, '-') < strchr(line, ' '))
            in = lo <= a && a < hi;
        else if (in && sscanf(line, "THPeligible: %d", &v) == 1)
            break;
    }
    fclose(f);
    return v;
}

/* a region asks for transparent huge pages (a first step's page faults:
 * one per 2 MiB instead of per 4 KiB), where the kernel offers them to
 * mappings that ask (its setting "always" or "madvise", not "never") */
static void test_huge_pages(void **state) {
    (void)state;
    char mode[256];
    read_word("/sys/kernel/mm/transparent_hugepage/enabled", mode, sizeof mode);
    tc_cpu_heap h = {0};
    char *p = tc_cpu_heap_alloc(&h, 8 * MB);
    assert_non_null(p);
    int v = thp_eligible(p);
    printf("THP: %s", mode[0] ? mode : "(no setting)\n");
    if (v >= 0 && (strstr(mode, "[always]") || strstr(mode, "[madvise]"))) assert_int_equal(v, 1);
    assert_true(tc_cpu_heap_free(&h, p, ALL));
    tc_cpu_heap_release(&h);
}

/* a region left with nothing in use is unmapped when the heap's free bytes
 * pass the bound its free is given */
static void test_keep_bound(void **state) {
    (void)state;
    tc_cpu_heap h = {0};
    char *a = tc_cpu_heap_alloc(&h, 1 * MB), *big = tc_cpu_heap_alloc(&h, 100 * MB);
    assert_non_null(a);
    assert_non_null(big);
    assert_int_equal(h.n, 2);
    assert_int_equal(h.mapped, 64 * MB + 100 * MB);
    assert_true(tc_cpu_heap_free(&h, big, 200 * MB)); /* 163 MiB free: kept */
    assert_int_equal(h.n, 2);
    char *again = tc_cpu_heap_alloc(&h, 100 * MB);
    assert_ptr_equal(again, big);
    assert_true(tc_cpu_heap_free(&h, again, 100 * MB)); /* 163 MiB free, 100 kept: unmapped */
    assert_int_equal(h.n, 1);
    assert_int_equal(h.mapped, 64 * MB);
    assert_true(tc_cpu_heap_free(&h, a, 0));
    assert_int_equal(h.n, 0);
    assert_int_equal(h.mapped, 0);
    tc_cpu_heap_release(&h);
}

/* a region that cannot be mapped, or a size no region can hold, fails the
 * allocation with TC_ERR_MEMORY and leaves the heap as it was */
static void test_out_of_memory(void **state) {
    (void)state;
    tc_cpu_heap h = {0};
    tc_mem_fail_after(1);
    assert_null(tc_cpu_heap_alloc(&h, 1 * MB));
    tc_mem_fail_after(0);
    assert_int_equal(tc_last_status(), TC_ERR_MEMORY);
    assert_int_equal(h.n, 0);
    assert_null(tc_cpu_heap_alloc(&h, SIZE_MAX - 8));
    assert_tc_error(TC_ERR_MEMORY, "CPU: cannot allocate");
    assert_null(tc_cpu_heap_alloc(&h, (size_t)1 << 46)); /* 64 TiB: no OS backs it */
    assert_tc_error(TC_ERR_MEMORY, "out of memory allocating 70368744177664 bytes");
    assert_int_equal(h.n, 0);
    char *a = tc_cpu_heap_alloc(&h, 1 * MB); /* and it still works */
    assert_non_null(a);
    assert_true(tc_cpu_heap_free(&h, a, ALL));
    tc_cpu_heap_release(&h);
}

/* the device: a big buffer's memory goes back to the heap, not to the
 * size-class cache, and serves the next big buffer whatever its size
 * (under ASan every buffer comes from malloc, so this is a release check) */
static void test_device_buffers(void **state) {
    (void)state;
    int id = tc_device_open("CPU", "test");
    assert_true(id >= 0);
    tc_runtime_trim();
    tc_buffer *a = tc_buffer_new(id, 3 * MB);
    assert_non_null(a);
    memset(a->ptr, 1, 3 * MB);
    void *p = a->ptr;
    tc_buffer_release(a);
    int64_t used, peak, cached;
    tc_runtime_mem(&used, &peak, &cached);
    tc_buffer *b = tc_buffer_new(id, 2 * MB + 12345); /* another size, the same memory */
    assert_non_null(b);
#if !defined(__SANITIZE_ADDRESS__)
    assert_int_equal(cached, 0);
    assert_ptr_equal(b->ptr, p);
#else
    (void)p, (void)cached;
#endif
    memset(b->ptr, 2, 2 * MB + 12345);
    tc_buffer_release(b);
    tc_runtime_shutdown();
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_fit_and_merge),  cmocka_unit_test(test_foreign_blocks),
        cmocka_unit_test(test_big_and_trim),   cmocka_unit_test(test_out_of_memory),
        cmocka_unit_test(test_keep_bound),     cmocka_unit_test(test_device_buffers),
        cmocka_unit_test(test_huge_pages),
    };
    int rc = cmocka_run_group_tests(tests, NULL, NULL);
    tc_shutdown();
    return rc;
}
