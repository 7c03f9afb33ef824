/* cpu.h - what the CPU device's files share, private to src/runtime:
 * cpu_cc.c turns C sources into shared objects in the kernel cache (the
 * system compiler, one run per kernel or per batch of kernels) and finds
 * them there; cpu.c loads them (dlopen), calls them and owns the device.
 *
 * The cache (tc_cachedir()), every entry published by rename():
 *   <key>.so   one source compiled alone: its entry point under its own name
 *   <key>.ref  "tinyc-batch <bkey> <sym>\n": the source was compiled in the
 *              batch <bkey>.so, its entry point renamed to <sym> =
 *              "<fn_name>__<key>"
 *   <bkey>.so  a batch: one translation unit holding several sources, each
 *              prelude item (include, typedef, helper function) once
 * key = tc_cpu_cc_key(source); bkey = tc_cpu_cc_key(the batch's text), so a
 * file named by a key holds exactly the compile of that key's text.
 *
 * Every entry ends in a seal (runtime.h: its key, size and sum), appended
 * before the rename (an ELF loader ignores bytes past what its headers
 * name). tc_cpu_cc_find gives only entries that verify (read and summed
 * now, or found whole earlier in this process in the version there now:
 * tc_cpu_checked), so nothing unverified is ever dlopen'ed, and removes
 * what does not (a file cut short, emptied or overwritten, another key's
 * entry, an older libtinyc's, an empty directory), so the rebuild takes
 * its place. A directory with files in it at an entry's name is left
 * alone: a kernel built then is loaded from its build's own temp file
 * (unlinked once loaded), and each process builds it again.
 */
#ifndef TC_CPU_H
#define TC_CPU_H

#include "runtime.h"

/* cpu_heap.c: the device's big buffers, blocks of large mappings (best
 * fit; freed neighbours merge) */
typedef struct tc_cpu_hblock tc_cpu_hblock;
typedef struct {
    char *base;            /* the mapping */
    size_t size;           /* its bytes */
    tc_cpu_hblock *blocks; /* in address order, covering it (owned) */
    int n, cap;            /* blocks used, allocated */
} tc_cpu_region;
typedef struct {
    tc_cpu_region *regions; /* oldest first (owned) */
    int n, cap;             /* regions used, allocated */
    size_t used;            /* bytes in blocks given out */
    size_t mapped;          /* bytes in regions */
} tc_cpu_heap;
/* nbytes (0 is fine), 64-byte aligned, not zeroed; NULL with TC_ERR_MEMORY */
TC_MUST_USE void *tc_cpu_heap_alloc(tc_cpu_heap *h, size_t nbytes);
/* frees a block of h; false (nothing done) if ptr is not one h gave out.
 * A region left with nothing in use is unmapped when h's free bytes (the
 * regions' bytes not given out) pass `keep`. */
bool tc_cpu_heap_free(tc_cpu_heap *h, void *ptr, size_t keep);
/* gives the OS the pages of free blocks and the regions that are all free */
void tc_cpu_heap_trim(tc_cpu_heap *h);
/* forgets h: unmaps its regions, but for those holding blocks still given
 * out (buffers that outlive their device keep their memory) */
void tc_cpu_heap_release(tc_cpu_heap *h);

/* a kernel to build: its cache key, source and entry point (borrowed) */
typedef struct {
    const char *key;     /* tc_cpu_cc_key(src): 32 hex characters */
    const char *src;     /* C source */
    const char *fn_name; /* entry point */
} tc_cpu_kernel;

/* versions of cache files this process checked and found whole, so that a
 * batch's .so is read once for all its kernels (owned by the device) */
typedef struct {
    tc_file_id *ids; /* the versions (owned) */
    int n;           /* used */
    int cap;         /* allocated */
} tc_cpu_checked;
void tc_cpu_checked_free(tc_cpu_checked *c);

/* hash of the compiler words (TC_CC, else cc), the flags and src */
TC_MUST_USE tc_status tc_cpu_cc_key(const char *src, char key[33]);
/* "<dir>/<name><ext>", tc_malloc'ed; NULL with TC_ERR_MEMORY */
char *tc_cpu_cc_path(const char *dir, const char *name, const char *ext);
/* mkdir -p dir (mode 0700 for what it creates) */
TC_MUST_USE tc_status tc_cpu_cc_make_dirs(const char *dir);
/* compiles src alone and publishes <dir>/<key>.so, sealed; a failure is
 * TC_ERR_COMPILE quoting the compiler's messages. *own is NULL when it was
 * published, else (a full directory holds the name) the path of the build's
 * own sealed file (tc_malloc'ed), for the caller to load and unlink. */
TC_MUST_USE tc_status tc_cpu_cc_build(const char *dir, const char *key, const char *src, const char *fn_name,
                          char **own);
/* builds ks[0..n) (distinct keys, none in the cache): ks split into as many
 * batches as compilers run at once (TC_CC_JOBS, else the cores), run
 * together (a batch of one is that kernel compiled alone); a batch that
 * fails is built again one kernel a run, so each kernel that compiles gets
 * its entry, and one that does not is left for tc_cpu_cc_build to report.
 * Only TC_ERR_MEMORY is an error. */
TC_MUST_USE tc_status tc_cpu_cc_build_all(const char *dir, const tc_cpu_kernel *ks, int n);
/* where key's entry point is: *so_path (tc_malloc'ed) and *sym (tc_malloc'ed;
 * fn_name for a <key>.so, the renamed symbol for a batch member), a file
 * whose seal verified (seen: the versions already checked, grown by what
 * this call checks). Both NULL when the cache has no entry that verifies
 * (or only a batch's ref whose .so is gone); what did not verify is
 * removed. */
TC_MUST_USE tc_status tc_cpu_cc_find(const char *dir, const char *key, const char *fn_name,
                         tc_cpu_checked *seen, char **so_path, char **sym);

/* ---- batches (cpu_batch.c) ---- */
/* whether src may share a translation unit with other kernels: its kernel
 * fn_name found, and nothing in it that would then mean something else */
bool tc_cpu_batch_can_join(const char *src, const char *fn_name);
/* the bytes of src's kernel proper (its definition to the end, the prelude
 * not counted) when src may join a batch, else 0 */
size_t tc_cpu_batch_kernel_bytes(const char *src, const char *fn_name);
/* one translation unit of the kernels ks[members[0..n)] (each one that may
 * join): every distinct prelude item once, each kernel's entry point
 * renamed to tc_cpu_batch_symbol's; tc_malloc'ed, NULL with an error */
char *tc_cpu_batch_text(const tc_cpu_kernel *ks, const int *members, int n);
/* "<fn_name>__<key>", tc_malloc'ed (NULL: TC_ERR_MEMORY) */
char *tc_cpu_batch_symbol(const char *fn_name, const char *key);

#endif /* TC_CPU_H */
