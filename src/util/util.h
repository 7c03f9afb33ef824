/* util.h - the interface of src/util: errors, memory, arenas, growable arrays,
 * string building, hashing, flags, the API lock, timing and dtype facts.
 * Everything here is leaf code: it includes nothing from the other stages.
 */
#ifndef TC_UTIL_H
#define TC_UTIL_H

#include "tinyc.h"
#include <stdarg.h>
#include <stdio.h>

/* a fallible internal call whose result must be looked at: ignoring it is
 * a warning (an error with TC_WERROR, as the test command builds). Every
 * internal function returning tc_status carries it, but the error setters
 * (their result is a convenience for `return tc_error_set(...)`). */
#define TC_MUST_USE __attribute__((warn_unused_result))

/* ---- errors (error.c) ---------------------------------------------------
 * The message lives in a fixed thread-local buffer: setting it never
 * allocates, so out-of-memory is reportable. */
/* sets this thread's error and returns code, so callers write
 * `return tc_error_set(TC_ERR_SHAPE, "tc_reshape: ...")` */
tc_status tc_error_set(tc_status code, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));
tc_status tc_error_code(void); /* code of the last error on this thread */
void tc_error_clear(void);
/* The public-call scope. Every TC_API function that can fail opens with
 * TC_API_ENTER(): the outermost such call on a thread names every message
 * set under it ("tc_realize: CPU compile of 'E_4' failed: ..."; a message
 * already starting with that name is kept as is), and tc_error_or tells
 * whether an error was set during it. Nested public calls (tc_safe_load
 * using tc_assign) keep the outer name. The frame closes itself at scope
 * exit (the cleanup attribute of gcc and clang). */
typedef struct {
    const char *prev;   /* the name open before this call; NULL: none */
    unsigned long long seq; /* the error sequence before this call */
} tc_api_frame;
tc_api_frame tc_api_enter(const char *name);
void tc_api_leave(tc_api_frame *f);
#define TC_API_ENTER()                                                                   \
    tc_api_frame tc_api_frame_ __attribute__((cleanup(tc_api_leave))) = tc_api_enter(__func__)
/* the code of an error set since the outermost public call began (outside
 * any call: the last code); else sets fallback with a message saying no
 * detail was recorded. Replaces the stale
 * `tc_error_code() ? tc_error_code() : TC_ERR_MEMORY` */
tc_status tc_error_or(tc_status fallback);
/* an internal step whose failure is not the caller's (a retry, a cache
 * write, a candidate build) saves the state first and restores it after,
 * instead of tc_error_clear(), which would wipe the user's last message */
#define TC_ERROR_MSG_MAX 2048 /* bytes of the per-thread message, with its NUL */
typedef struct {
    tc_status code;
    unsigned long long seq;
    char msg[TC_ERROR_MSG_MAX];
} tc_error_state;
void tc_error_save(tc_error_state *st);
void tc_error_restore(const tc_error_state *st);
/* an internal invariant broke: TC_ERR_INTERNAL with file:line */
#define TC_INTERNAL(...) tc_error_internal(__FILE__, __LINE__, __VA_ARGS__)
tc_status tc_error_internal(const char *file, int line, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

/* ---- memory (mem.c) -----------------------------------------------------
 * All library allocations go through these, so a test can make the Nth one
 * fail (Lua's failing allocator). Failure sets TC_ERR_MEMORY and returns NULL. */
TC_MUST_USE void *tc_malloc(size_t n);
TC_MUST_USE void *tc_calloc(size_t count, size_t size);
TC_MUST_USE void *tc_realloc(void *p, size_t n);
void tc_free(void *p);
TC_MUST_USE char *tc_strdup(const char *s);
/* n bytes, zeroed and page-aligned, mapped from the OS on their own (a page
 * is backed when first written; a size the OS cannot back fails at once);
 * failing as tc_malloc does. tc_unmap gives them back. */
TC_MUST_USE void *tc_map(size_t n);
void tc_unmap(void *p, size_t n);
/* test hook: the nth allocation from now fails (1 = the next); 0 turns it off */
void tc_mem_fail_after(int64_t n);

/* ---- arena (mem.c): many small allocations freed in one call ------------- */
typedef struct tc_arena_block tc_arena_block;
typedef struct {
    tc_arena_block *head; /* newest block first */
} tc_arena;
TC_MUST_USE void *tc_arena_alloc(tc_arena *a, size_t n); /* zeroed, 16-byte aligned; NULL on OOM */
char *tc_arena_strdup(tc_arena *a, const char *s);
void tc_arena_free(tc_arena *a); /* frees every block; the arena may be reused */

/* ---- growable pointer array (mem.c) -------------------------------------- */
typedef struct {
    void **items; /* n used, cap allocated */
    int n;
    int cap;
} tc_ptrvec;
TC_MUST_USE tc_status tc_ptrvec_push(tc_ptrvec *v, void *p); /* TC_ERR_MEMORY on failure */
void tc_ptrvec_free(tc_ptrvec *v);              /* frees the array, not the items */

/* ---- pointer map and set (map.c) ------------------------------------------
 * Hash map from non-NULL pointers to pointers; a set is a map whose values
 * are unused. A zeroed struct is an empty map. An insert that runs out of
 * memory sets `failed` (sticky) and changes nothing: callers check it once. */
typedef struct {
    void **keys;  /* cap slots, NULL = empty */
    void **vals;  /* cap values, parallel to keys */
    int n;        /* keys stored */
    int cap;      /* 0 or a power of two */
    bool failed;  /* an insert ran out of memory */
} tc_ptrmap;
TC_MUST_USE bool tc_ptrmap_put(tc_ptrmap *m, const void *key, void *val); /* false: out of memory */
bool tc_ptrmap_get(const tc_ptrmap *m, const void *key, void **val); /* val may be NULL */
bool tc_ptrset_add(tc_ptrmap *m, const void *key); /* true: newly added */
void tc_ptrmap_clear(tc_ptrmap *m);                 /* empty; keeps the table */
void tc_ptrmap_free(tc_ptrmap *m);

/* ---- string builder (str.c) ---------------------------------------------- */
typedef struct {
    char *s;    /* NUL-terminated text, owned */
    size_t len; /* bytes used, without the NUL */
    size_t cap; /* bytes allocated */
    bool failed; /* an allocation failed; s holds what fit */
} tc_strbuf;
void tc_sb_printf(tc_strbuf *b, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
void tc_sb_vprintf(tc_strbuf *b, const char *fmt, va_list ap);
void tc_sb_append(tc_strbuf *b, const void *bytes, size_t n); /* raw bytes (NUL kept after) */
void tc_sb_free(tc_strbuf *b);
/* formats a shape as "(3,4)" into buf (always NUL-terminated) */
const char *tc_fmt_shape(char *buf, size_t bufsize, int ndim, const int64_t *shape);

/* ---- hashing (str.c) ---------------------------------------------------- */
uint64_t tc_hash_bytes(const void *p, size_t n, uint64_t seed);
uint64_t tc_hash_combine(uint64_t h, uint64_t v);
/* 32 lowercase hex characters of a 128-bit hash of s, for cache file names */
void tc_hash_hex(const char *s, size_t n, char out[33]);

/* ---- flags (flags.c) ----------------------------------------------------- */
typedef enum {
    TC_FLAG_DEBUG,  /* TC_DEBUG: 1 realize summary, 2 per kernel, 3 ASTs, 4 source, 5 UOps */
    TC_FLAG_NOOPT,  /* TC_NOOPT: plain loops, no kernel optimisation */
    TC_FLAG_NOFUSE, /* TC_NOFUSE: one kernel per reduce and per realized elementwise group */
    TC_FLAG_BEAM,   /* TC_BEAM: search width for kernel optimisation */
    TC_FLAG_NOROWS, /* TC_NOROWS: no row kernels (schedule/rows.c): each kernel stays apart */
    TC_FLAG_KERNEL_OPS, /* TC_KERNEL_OPS: the most elementwise ops a kernel inlines from one
                           value's cone (schedule.c; 0: the default, -1: no bound) */
    TC_FLAG_COUNT
} tc_flag;
int64_t tc_flag_get(tc_flag f);             /* reads the environment on first use */
void tc_flag_put(tc_flag f, int64_t value); /* overrides the environment */
int tc_flag_lookup(const char *name);       /* "TC_DEBUG" -> TC_FLAG_DEBUG, -1 if unknown */
const char *tc_cachedir(void); /* TC_CACHEDIR, else $XDG_CACHE_HOME/tinyc, else ~/.cache/tinyc */
void tc_flags_shutdown(void);

/* ---- the API lock (flags.c): one recursive lock taken at API entry ------ */
void tc_lock(void);
void tc_unlock(void);

/* ---- time (flags.c) ----------------------------------------------------- */
double tc_time_now(void); /* monotonic seconds */

/* ---- dtypes (dtype.c) ---------------------------------------------------- */
typedef struct {
    const char *name;  /* "float32" */
    const char *cname; /* C type in rendered code: "float" */
    size_t size;       /* bytes per element */
    bool is_float;     /* float16, float32 or float64 */
    bool is_signed;    /* signed integer or float */
    int priority;      /* width order: bool < 8 < 16 < 32 < 64 bits < float16 = bfloat16 <
                          float32 < float64 */
} tc_dtype_info;
extern const tc_dtype_info tc_dtypes[TC_DTYPE_COUNT];
bool tc_dtype_valid(int dt);
tc_dtype tc_dtype_promote(tc_dtype a, tc_dtype b); /* numpy's result dtype of a op b (dtype.c) */
/* the values of an integer dtype (bool: 0 and 1); false for a float dtype.
 * uint64's *hi is INT64_MAX (its values past that do not fit an int64) */
bool tc_dtype_int_range(tc_dtype dt, int64_t *lo, int64_t *hi);
/* v wrapped to an integer dtype's width, as a C conversion does (two's
 * complement; bool: v != 0); floats and 64-bit integers: v. Integers of
 * every dtype travel in an int64; uint64 as its bits (2^64-1 is -1) */
int64_t tc_dtype_wrap(tc_dtype dt, int64_t v);
/* integer v (an int64 as above) of integer dtype dt as a double: uint64's
 * bits as unsigned, others as signed */
double tc_dtype_int_to_double(tc_dtype dt, int64_t v);
/* double v truncated to integer dtype dt (an int64 as above): in range
 * values exactly, as a C conversion; uint64 up to 2^64 */
int64_t tc_dtype_double_to_int(tc_dtype dt, double v);
/* v rounded to float dtype dt's precision (float16, float32: as a C
 * conversion rounds, to nearest even; float64: v); integers: v */
double tc_dtype_round(tc_dtype dt, double v);
/* the dtype float math on dt runs in: float64 for float64, else float32 */
tc_dtype tc_dtype_float_acc(tc_dtype dt);
float tc_bf16_to_float(uint16_t b);  /* exact */
uint16_t tc_float_to_bf16(float f); /* round to nearest even; NaN stays (quiet) NaN */
float tc_half_to_float(uint16_t h);
uint16_t tc_float_to_half(float f); /* round to nearest even */
/* reads element i of an array of dtype dt as double / writes one (with C casts;
 * bool stores v != 0) */
double tc_scalar_load(const void *p, tc_dtype dt, int64_t i);
void tc_scalar_store(void *p, tc_dtype dt, int64_t i, double v);
int64_t tc_scalar_load_int(const void *p, tc_dtype dt, int64_t i); /* exact for int64 */
void tc_scalar_store_int(void *p, tc_dtype dt, int64_t i, int64_t v);

#endif /* TC_UTIL_H */
