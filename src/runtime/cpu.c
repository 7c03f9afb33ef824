/* cpu.c - the CPU device: host memory, and C source -> shared object -> call.
 *
 * Memory: 64-byte aligned blocks from the util allocator (so the failing
 * allocator reaches them too); copies are memcpy.
 * compile: source -> key = tc_cpu_cc_key(compiler, flags, source). Programs
 * (dlopen handle + entry point + libffi call interface) are kept in the
 * device by (key, fn_name), so a source is loaded once per process. On a
 * miss the key's cache entry (cpu.h: its own .so, or a batch's .so and the
 * renamed entry point) is dlopen'ed once its seal verifies; when there is
 * none that verifies and loads, the source is compiled alone (cpu_cc.c)
 * and its .so published (or, when a full directory holds its name, loaded
 * from the build's own file). prebuild
 * builds the new kernels of a schedule ahead, in batches of one translation
 * unit each, as many compilers at once as there are cores.
 * launch: fn(bufs...) through libffi, every argument a pointer; a split
 * kernel's slices run on a thread pool (see "threads" below).
 * The device owns its programs; close dlcloses and frees them. Callers
 * serialize compile, close and a program's first launch with a new argument
 * count (the API lock); launches keep their argument array on their stack.
 */
#define _GNU_SOURCE /* pthread_attr_setaffinity_np, sched_getcpu: a worker's first CPU */
#include "runtime/cpu.h"

#include <dlfcn.h>
#include <ffi.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdlib.h>
#include <pthread.h>
#include <sched.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#define CPU_ALIGN     64  /* alignment of every buffer, in bytes */
#define ARGS_ON_STACK 128 /* buffers a split launch takes (a plain launch past it allocates) */

struct tc_program {
    char key[33];         /* hash of compiler, flags and source: the .so's file name */
    char *fn_name;        /* entry point (owned) */
    void *handle;         /* dlopen handle (one reference, dlclose'd at close) */
    void *fn;             /* the entry point, from dlsym */
    int n_args;           /* pointer arguments cif is prepared for; -1 = not yet */
    ffi_cif cif;          /* libffi call interface: void fn(void *, ..., void *) */
    ffi_type **arg_types; /* n_args x &ffi_type_pointer (owned; cif points at it) */
};

typedef struct {
    tc_ptrvec programs;     /* tc_program *, owned; looked up by (key, fn_name) */
    tc_cpu_checked checked; /* cache files whose seals verified (cpu.h) */
    tc_cpu_heap heap;       /* buffers of HEAP_MIN bytes or more (cpu_heap.c) */
} cpu_ctx;

/* ---- memory --------------------------------------------------------------- */

/* A buffer of HEAP_MIN bytes or more lives in the device's heap
 * (cpu_heap.c says why), a smaller one comes from malloc. Under ASan every
 * one comes from malloc, where an overrun is caught. */
#if defined(__SANITIZE_ADDRESS__)
#define HEAP_MIN SIZE_MAX
#else
#define HEAP_MIN ((size_t)64 << 10)
#endif

/* nbytes (0 is fine) aligned to CPU_ALIGN; from malloc, the raw block's
 * address sits in the word just below the returned pointer */
static void *cpu_alloc(tc_dev *d, size_t nbytes) {
    if (nbytes >= HEAP_MIN) return tc_cpu_heap_alloc(&((cpu_ctx *)d->ctx)->heap, nbytes);
    size_t extra = CPU_ALIGN + sizeof(void *);
    if (nbytes > SIZE_MAX - extra) {
        tc_error_set(TC_ERR_MEMORY, "CPU: cannot allocate %zu bytes", nbytes);
        return NULL;
    }
    char *raw = tc_malloc(nbytes + extra);
    if (!raw) {
        tc_error_set(TC_ERR_MEMORY, "CPU: out of memory allocating %zu bytes", nbytes);
        return NULL;
    }
    uintptr_t at = ((uintptr_t)raw + sizeof(void *) + CPU_ALIGN - 1) & ~(uintptr_t)(CPU_ALIGN - 1);
    void **p = (void **)at;
    p[-1] = raw;
    return p;
}

static void cpu_free(tc_dev *d, void *ptr) {
    if (!ptr) return;
    int64_t keep = tc_runtime_cache_limit();
    if (!tc_cpu_heap_free(&((cpu_ctx *)d->ctx)->heap, ptr, keep > 0 ? (size_t)keep : 0))
        tc_free(((void **)ptr)[-1]);
}

static void cpu_trim(tc_dev *d) {
    tc_cpu_heap_trim(&((cpu_ctx *)d->ctx)->heap);
}

TC_MUST_USE static tc_status cpu_copyin(tc_dev *d, void *dst, size_t offset, const void *src, size_t nbytes) {
    (void)d;
    if (nbytes) memmove((char *)dst + offset, src, nbytes);
    return TC_OK;
}

TC_MUST_USE static tc_status cpu_copyout(tc_dev *d, void *dst, const void *src, size_t offset,
                             size_t nbytes) {
    (void)d;
    if (nbytes) memmove(dst, (const char *)src + offset, nbytes);
    return TC_OK;
}

/* ---- programs --------------------------------------------------------------- */

static tc_program *find_program(cpu_ctx *ctx, const char *key, const char *fn_name) {
    for (int i = 0; i < ctx->programs.n; i++) {
        tc_program *p = ctx->programs.items[i];
        if (strcmp(p->key, key) == 0 && strcmp(p->fn_name, fn_name) == 0) return p;
    }
    return NULL;
}

static void program_free(tc_program *p) {
    if (p->handle) dlclose(p->handle);
    tc_free(p->fn_name);
    tc_free(p->arg_types);
    tc_free(p);
}

/* dlopens the .so at path (its seal verified) and finds sym in it;
 * *handle stays NULL when either fails (why: dlerror's words, or NULL when
 * the symbol is missing) */
static void open_sym(const char *path, const char *sym, void **handle, void **fn,
                     const char **why) {
    *fn = NULL;
    *why = NULL;
    *handle = dlopen(path, RTLD_NOW | RTLD_LOCAL);
    if (!*handle) {
        *why = dlerror();
        if (!*why) *why = "unknown error";
        return;
    }
    *fn = dlsym(*handle, sym);
    if (!*fn) dlclose(*handle), *handle = NULL;
}

/* dlopens the cached entry of key (a .so of its own, or its batch's) once
 * its seal verifies and finds its entry point; *handle stays NULL when the
 * cache has no entry that loads (a batch's .so without the symbol counts as
 * none; a kernel's own .so without it is a source without that function) */
TC_MUST_USE static tc_status load_cached(cpu_ctx *ctx, const char *dir, const char *key, const char *fn_name,
                             void **handle, void **fn) {
    char *so_path, *sym;
    const char *why;
    *handle = *fn = NULL;
    tc_status st = tc_cpu_cc_find(dir, key, fn_name, &ctx->checked, &so_path, &sym);
    if (st != TC_OK || !so_path) return st;
    bool is_alone = strcmp(sym, fn_name) == 0;
    open_sym(so_path, sym, handle, fn, &why);
    if (!*handle && !why && is_alone)
        st = tc_error_set(TC_ERR_COMPILE, "CPU compile: the source has no function '%s'", fn_name);
    tc_free(so_path), tc_free(sym);
    return st;
}

/* loads key's entry point from the cache, building the source alone first
 * when the cache has no entry that verifies and loads */
TC_MUST_USE static tc_status load_so(cpu_ctx *ctx, const char *dir, const char *key, const char *src,
                         const char *fn_name, void **handle, void **fn) {
    tc_status st = load_cached(ctx, dir, key, fn_name, handle, fn);
    if (st != TC_OK || *handle) return st;
    char *own = NULL, *path = NULL, *sym = NULL;
    if ((st = tc_cpu_cc_build(dir, key, src, fn_name, &own)) != TC_OK) return st;
    tc_cache_entry e = {.is_whole = true};
    if (own) tc_cache_check(own, key, &e); /* a full directory holds the name: the build's file */
    else st = tc_cpu_cc_find(dir, key, fn_name, &ctx->checked, &path, &sym);
    const char *at = own ? own : path, *why = "its seal did not verify";
    if (st == TC_OK && at && e.is_whole) open_sym(at, own ? fn_name : sym, handle, fn, &why);
    if (st == TC_OK && !*handle && !why)
        st = tc_error_set(TC_ERR_COMPILE, "CPU compile: the source has no function '%s'", fn_name);
    else if (st == TC_OK && !*handle && at)
        st = tc_error_set(TC_ERR_COMPILE, "CPU compile of '%s': cannot load '%s': %s", fn_name,
                          at, why);
    else if (st == TC_OK && !*handle)
        st = tc_error_set(TC_ERR_COMPILE, "CPU compile of '%s': its new cache entry in '%s' was "
                          "replaced by one that does not verify", fn_name, dir);
    if (own) unlink(own);
    tc_free(own), tc_free(path), tc_free(sym);
    return st;
}

/* a new program for (key, fn_name), loaded or compiled; NULL with an error */
static tc_program *program_new(cpu_ctx *ctx, const char *key, const char *src,
                               const char *fn_name) {
    const char *dir = tc_cachedir();
    if (!dir) {
        if (tc_error_code() == TC_OK) tc_error_set(TC_ERR_IO, "CPU compile: no cache directory");
        return NULL;
    }
    tc_program *p = tc_calloc(1, sizeof *p);
    if (!p) return NULL;
    memcpy(p->key, key, 33);
    p->n_args = -1;
    p->fn_name = tc_strdup(fn_name);
    tc_status st = p->fn_name ? tc_cpu_cc_make_dirs(dir) : TC_ERR_MEMORY;
    if (st == TC_OK) st = load_so(ctx, dir, key, src, fn_name, &p->handle, &p->fn);
    if (st != TC_OK) {
        program_free(p);
        return NULL;
    }
    return p;
}

static tc_program *cpu_compile(tc_dev *d, const char *src, const char *fn_name) {
    if (!src || !fn_name || !*fn_name) {
        tc_error_set(TC_ERR_INVALID, "CPU compile: no source or no function name (src %p, fn '%s')",
                     (const void *)src, fn_name ? fn_name : "(null)");
        return NULL;
    }
    cpu_ctx *ctx = d->ctx;
    char key[33];
    if (tc_cpu_cc_key(src, key) != TC_OK) return NULL;
    tc_program *p = find_program(ctx, key, fn_name);
    if (p) return p;
    p = program_new(ctx, key, src, fn_name);
    if (p && tc_ptrvec_push(&ctx->programs, p) != TC_OK) {
        program_free(p);
        return NULL;
    }
    return p;
}

/* whether key is loaded in this process or has an entry in the cache */
TC_MUST_USE static tc_status is_built(cpu_ctx *ctx, const char *dir, const char *key, const char *fn_name,
                          bool *yes) {
    *yes = false;
    for (int k = 0; k < ctx->programs.n && !*yes; k++)
        *yes = strcmp(((tc_program *)ctx->programs.items[k])->key, key) == 0;
    if (*yes) return TC_OK;
    char *so_path, *sym;
    tc_status st = tc_cpu_cc_find(dir, key, fn_name, &ctx->checked, &so_path, &sym);
    *yes = so_path != NULL;
    tc_free(so_path), tc_free(sym);
    return st;
}

/* builds every source that is neither loaded nor cached, in batches
 * (tc_cpu_cc_build_all). A source that fails to build here is compiled
 * again by compile, which reports the error; only running out of memory is
 * an error here. */
TC_MUST_USE static tc_status cpu_prebuild(tc_dev *d, const char *const *srcs, const char *const *fn_names,
                              int n) {
    cpu_ctx *ctx = d->ctx;
    tc_error_state es;
    tc_error_save(&es);
    const char *dir = n >= 2 ? tc_cachedir() : NULL;
    if (!dir || tc_cpu_cc_make_dirs(dir) != TC_OK) { /* nothing to gain, or compile will say why */
        tc_error_restore(&es);
        return TC_OK;
    }
    char(*keys)[33] = tc_malloc((size_t)n * sizeof *keys);
    tc_cpu_kernel *ks = keys ? tc_malloc((size_t)n * sizeof *ks) : NULL;
    tc_status st = ks ? TC_OK : TC_ERR_MEMORY;
    int m = 0;
    for (int i = 0; i < n && st == TC_OK; i++) {
        if (!srcs[i] || !fn_names[i] || !*fn_names[i]) continue;
        if ((st = tc_cpu_cc_key(srcs[i], keys[i])) != TC_OK) break;
        bool is_known = false;
        for (int k = 0; k < m && !is_known; k++) is_known = strcmp(ks[k].key, keys[i]) == 0;
        if (!is_known) st = is_built(ctx, dir, keys[i], fn_names[i], &is_known);
        if (st == TC_OK && !is_known) ks[m++] = (tc_cpu_kernel){keys[i], srcs[i], fn_names[i]};
    }
    if (st == TC_OK) st = tc_cpu_cc_build_all(dir, ks, m);
    tc_free(ks), tc_free(keys);
    if (st == TC_OK) tc_error_restore(&es); /* failed builds: compile reports them */
    else tc_error_set(TC_ERR_MEMORY, "CPU compile: out of memory building kernels");
    return st;
}

/* (re)builds p's call interface for n pointer arguments */
TC_MUST_USE static tc_status prepare_cif(tc_program *p, int n) {
    ffi_type **types = tc_malloc((n > 0 ? (size_t)n : 1) * sizeof *types);
    if (!types) return TC_ERR_MEMORY;
    for (int i = 0; i < n; i++) types[i] = &ffi_type_pointer;
    ffi_cif cif;
    ffi_status fs = ffi_prep_cif(&cif, FFI_DEFAULT_ABI, (unsigned)n, &ffi_type_void, types);
    if (fs != FFI_OK) {
        tc_free(types);
        return tc_error_set(TC_ERR_RUNTIME,
                            "CPU launch of '%s': ffi_prep_cif failed (%d) for %d "
                            "arguments",
                            p->fn_name, (int)fs, n);
    }
    tc_free(p->arg_types);
    p->cif = cif;
    p->arg_types = types;
    p->n_args = n;
    return TC_OK;
}

/* ---- threads: a kernel whose outermost loop is split (dims->cpu_range)
 * takes {start, end} as one more argument. The steps are cut into parts
 * (TC_THREADS of them, read per launch, default the cores) that the calling
 * thread and the workers of a process-wide pool take one at a time, so any
 * thread count gives the same slices and so the same numbers.
 * The pool: cores-1 workers (TC_THREADS at creation overrides), started on
 * the first split launch, stopped and joined by tc_shutdown (cpu_close) or,
 * failing that, when the library is unloaded or the process exits. One
 * launch at a time owns the pool; a launch that finds it busy (tc_realize
 * from several threads) runs its parts on its own thread, so the process
 * never runs more kernel threads than cores + callers. A forked child does
 * not use its parent's pool (its workers do not exist there). */

#define MAX_THREADS 64
#define SPIN_ROUNDS 4000    /* polls with a pause (~90 us on Zen 5) before a waiter yields */
#define YIELD_NS    2000000 /* then it yields the CPU until this long has passed, then sleeps */

typedef struct {
    tc_program *p;   /* the kernel */
    void **bufs;     /* buffer pointers (shared, read-only) */
    int n_bufs;      /* how many */
    int64_t steps;   /* the outermost loop's steps */
    int n_parts;     /* slices of the steps */
    int64_t chunk;   /* steps per slice (the last may be shorter) */
    atomic_int next; /* the next slice to take */
} split_job;

/* A job is published by storing `state` = generation << 32 | seats: a worker
 * that sees a new generation takes a seat (compare-and-swap) and then runs
 * slices of `job`; with no seat left it waits for the next generation. The
 * launcher takes the seats nobody took once every slice is gone, and waits
 * until `pending` (the workers seated) drops to 0. Waiting is a short spin,
 * then yields for up to YIELD_NS, then a sleep on a condition variable
 * (`sleepers` says who sleeps); a worker woken from a sleep goes back to
 * its first CPU (go_home) before it takes a seat. Both because a sleeping
 * thread wakes late and may wake on the busy CPU: one matmul 256^3
 * realized at TC_THREADS=2 every 0.2 to 2 ms (2 vCPUs, Zen 5; 131-139 us
 * at 1 thread) took 96-205 us with a 90 us spin (the worker woken about
 * 100 us late, or on the caller's CPU, where it preempts the caller); 71-72
 * us with the yields up to 1 ms gaps, 135-137 us at 5 ms gaps with
 * go_home, 196-205 without. */
typedef struct thread_pool_s {
    _Atomic uint64_t state;      /* generation << 32 | seats left */
    atomic_int pending;          /* seated workers still running the job */
    atomic_bool stop;            /* workers exit */
    atomic_bool busy;            /* a launch owns the pool */
    split_job *job;              /* the current job (written before state) */
    pthread_mutex_t mu;          /* guards the sleeps */
    pthread_cond_t wake;         /* workers: a new generation or stop */
    pthread_cond_t done;         /* the launcher: pending reached 0 */
    int sleepers;                /* workers asleep on wake (under mu) */
    pthread_t tids[MAX_THREADS]; /* workers */
    int n_workers;               /* started */
    pid_t pid;                   /* the process that started the workers */
#ifdef __linux__
    cpu_set_t cpus;         /* the creator's CPUs: each worker's once it runs */
    bool placed;            /* cpus was read: workers take it when they start */
    int home[MAX_THREADS];  /* the CPU each worker started on; -1: left to the kernel */
#endif
    struct worker_arg {
        struct thread_pool_s *tp;
        int i; /* the worker's index */
    } args[MAX_THREADS];
} thread_pool;

static thread_pool *pool; /* NULL until the first split launch */
static pthread_mutex_t pool_init_mu = PTHREAD_MUTEX_INITIALIZER; /* guards pool and its creation */

static int cpu_threads(void) {
    const char *e = getenv("TC_THREADS");
    long n = e && *e ? strtol(e, NULL, 10) : sysconf(_SC_NPROCESSORS_ONLN);
    return n < 1 ? 1 : n > MAX_THREADS ? MAX_THREADS : (int)n;
}

static void cpu_relax(void) {
#if defined(__x86_64__) || defined(__i386__)
    __builtin_ia32_pause();
#elif defined(__aarch64__)
    __asm__ __volatile__("yield");
#endif
}

/* one more poll of a waiter that started at poll 0: a pause, or after
 * SPIN_ROUNDS a sched_yield (so a thread that wants this CPU gets it, and
 * the CPU stays awake); false once YIELD_NS have passed since the yields
 * began: time to sleep. Waking a sleeping thread took ~100 us here (a
 * halted vCPU), a launch of a 256^3 matmul at 2 threads takes 70. */
static bool keep_polling(int *polls, struct timespec *t0) {
    if (*polls < SPIN_ROUNDS) {
        (*polls)++;
        cpu_relax();
        return true;
    }
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    if ((*polls)++ == SPIN_ROUNDS) *t0 = t;
    if ((int64_t)(t.tv_sec - t0->tv_sec) * 1000000000 + (t.tv_nsec - t0->tv_nsec) > YIELD_NS) return false;
    sched_yield();
    return true;
}

/* takes slices until none is left */
static void run_parts(split_job *j) {
    void *values[ARGS_ON_STACK + 1];
    int64_t range[2];
    void *range_ptr = range;
    for (int i = 0; i < j->n_bufs; i++) values[i] = &j->bufs[i];
    values[j->n_bufs] = &range_ptr;
    for (;;) {
        int k = atomic_fetch_add_explicit(&j->next, 1, memory_order_relaxed);
        if (k >= j->n_parts) return;
        range[0] = k * j->chunk;
        range[1] = range[0] + j->chunk < j->steps ? range[0] + j->chunk : j->steps;
        ffi_call(&j->p->cif, FFI_FN(j->p->fn), NULL, values);
    }
}

/* the next state whose generation is not seen (spinning, then sleeping:
 * *slept); 0 when the pool stops */
static uint64_t next_generation(thread_pool *tp, uint32_t seen, bool *slept) {
    *slept = false;
    struct timespec t0;
    for (int polls = 0; keep_polling(&polls, &t0);) {
        uint64_t s = atomic_load_explicit(&tp->state, memory_order_acquire);
        if (atomic_load_explicit(&tp->stop, memory_order_relaxed)) return 0;
        if ((uint32_t)(s >> 32) != seen) return s;
    }
    *slept = true;
    pthread_mutex_lock(&tp->mu);
    tp->sleepers++;
    uint64_t s = 0;
    while (!atomic_load(&tp->stop) && (uint32_t)((s = atomic_load(&tp->state)) >> 32) == seen)
        pthread_cond_wait(&tp->wake, &tp->mu);
    tp->sleepers--;
    pthread_mutex_unlock(&tp->mu);
    return atomic_load(&tp->stop) ? 0 : s;
}

/* worker i back on its first CPU (start_workers), then free to move */
static void go_home(thread_pool *tp, int i) {
#ifdef __linux__
    if (tp->home[i] < 0) return;
    cpu_set_t one;
    CPU_ZERO(&one);
    CPU_SET(tp->home[i], &one);
    pthread_setaffinity_np(pthread_self(), sizeof one, &one);
    pthread_setaffinity_np(pthread_self(), sizeof tp->cpus, &tp->cpus);
#else
    (void)tp, (void)i;
#endif
}

static void *worker_main(void *arg) {
    struct worker_arg *wa = arg;
    thread_pool *tp = wa->tp;
    uint32_t seen = 0;
    bool slept;
#ifdef __linux__
    pthread_setname_np(pthread_self(), "tc-worker"); /* as top -H and the tests see it */
    if (tp->placed) pthread_setaffinity_np(pthread_self(), sizeof tp->cpus, &tp->cpus);
#endif
    for (;;) {
        uint64_t s = next_generation(tp, seen, &slept);
        if (!s) return NULL;
        if (slept) go_home(tp, wa->i);
        seen = (uint32_t)(s >> 32);
        bool is_seated = false;
        while ((uint32_t)s != 0 && (uint32_t)(s >> 32) == seen &&
               !(is_seated = atomic_compare_exchange_weak(&tp->state, &s, s - 1))) {
        }
        if (!is_seated) continue; /* enough workers on this job */
        run_parts(tp->job);
        if (atomic_fetch_sub(&tp->pending, 1) == 1) {
            pthread_mutex_lock(&tp->mu);
            pthread_cond_signal(&tp->done);
            pthread_mutex_unlock(&tp->mu);
        }
    }
}

/* stops and joins the workers and frees the pool; the caller owns it */
static void pool_destroy(thread_pool *tp) {
    pthread_mutex_lock(&tp->mu);
    atomic_store(&tp->stop, true);
    pthread_cond_broadcast(&tp->wake);
    pthread_mutex_unlock(&tp->mu);
    for (int i = 0; i < tp->n_workers; i++) pthread_join(tp->tids[i], NULL);
    pthread_mutex_destroy(&tp->mu);
    pthread_cond_destroy(&tp->wake);
    pthread_cond_destroy(&tp->done);
    tc_free(tp);
}

/* Starts n workers. Linux may queue a new thread on its creator's CPU
 * while another is idle and leave it there until a load balance moves it,
 * milliseconds later; meanwhile the caller runs every slice itself: in 6
 * of 8 fresh processes of `bench_ops --only matmul256` at TC_THREADS=2 (2
 * vCPUs, Zen 5) the worker took no slice of the first 9 to 43 launches,
 * and the median GFLOPS halved in 1 run of 4. So, on Linux, each worker
 * starts allowed only on the next of the creator's CPUs after the last one
 * used (the creator's first), and then takes all of the creator's CPUs
 * back (worker_main): a first place, not a pin. */
static void start_workers(thread_pool *tp, int n) {
    pthread_attr_t attr, *at = NULL;
#ifdef __linux__
    int cpu = sched_getcpu();
    tp->placed = cpu >= 0 && sched_getaffinity(0, sizeof tp->cpus, &tp->cpus) == 0 &&
                 CPU_COUNT(&tp->cpus) > 1 && pthread_attr_init(&attr) == 0;
    if (tp->placed) at = &attr;
#endif
    for (int i = 0; i < n; i++) {
#ifdef __linux__
        if (at) { /* the next of the creator's CPUs, round the set */
            do cpu = (cpu + 1) % CPU_SETSIZE;
            while (!CPU_ISSET(cpu, &tp->cpus));
            cpu_set_t one;
            CPU_ZERO(&one);
            CPU_SET(cpu, &one);
            if (pthread_attr_setaffinity_np(at, sizeof one, &one) != 0) at = NULL; /* the rest unplaced */
        }
        tp->home[tp->n_workers] = at ? cpu : -1;
#endif
        tp->args[tp->n_workers] = (struct worker_arg){tp, tp->n_workers};
        if (pthread_create(&tp->tids[tp->n_workers], at, worker_main, &tp->args[tp->n_workers]) != 0) break;
        tp->n_workers++;
    }
#ifdef __linux__
    if (tp->placed) pthread_attr_destroy(&attr);
#endif
}

/* the pool, started on first use; NULL when it has no workers to offer
 * (one thread wanted, no memory, or a forked child) */
static thread_pool *pool_get(void) {
    pthread_mutex_lock(&pool_init_mu);
    thread_pool *tp = pool;
    if (!tp) {
        int n = cpu_threads() - 1;
        tp = n > 0 ? tc_calloc(1, sizeof *tp) : NULL;
        if (tp) {
            pthread_mutex_init(&tp->mu, NULL);
            pthread_cond_init(&tp->wake, NULL);
            pthread_cond_init(&tp->done, NULL);
            atomic_init(&tp->state, (uint64_t)1 << 32); /* generation 1, no seats */
            atomic_init(&tp->pending, 0);
            atomic_init(&tp->stop, false);
            atomic_init(&tp->busy, false);
            tp->pid = getpid();
            start_workers(tp, n);
            pool = tp;
        }
    }
    pthread_mutex_unlock(&pool_init_mu);
    return tp && tp->n_workers > 0 && tp->pid == getpid() ? tp : NULL;
}

/* tc_shutdown (cpu_close) and library unload: joins the workers */
static void pool_shutdown(void) {
    pthread_mutex_lock(&pool_init_mu);
    thread_pool *tp = pool;
    /* a child of fork has no workers to join; a pool still in use (exit
     * from another thread mid-launch) is left to the process's end */
    if (tp && tp->pid == getpid() && !atomic_load(&tp->busy)) {
        pool = NULL;
        pool_destroy(tp);
    }
    pthread_mutex_unlock(&pool_init_mu);
}

__attribute__((destructor)) static void pool_unload(void) {
    pool_shutdown();
}

TC_MUST_USE static tc_status launch_split(tc_program *p, void **bufs, int n_bufs, int64_t steps) {
    if (n_bufs > ARGS_ON_STACK)
        return tc_error_set(TC_ERR_RUNTIME, "CPU launch of '%s': %d buffers (at most %d)",
                            p->fn_name, n_bufs, ARGS_ON_STACK);
    int n = cpu_threads();
    if (n > steps) n = (int)steps;
    split_job j = {.p = p, .bufs = bufs, .n_bufs = n_bufs, .steps = steps, .n_parts = n};
    j.chunk = n > 0 ? (steps + n - 1) / n : 0;
    atomic_init(&j.next, 0);
    thread_pool *tp = n > 1 ? pool_get() : NULL;
    bool expected = false;
    if (!tp || !atomic_compare_exchange_strong(&tp->busy, &expected, true)) {
        run_parts(&j); /* one thread wanted, or the pool is busy: this thread alone */
        return TC_OK;
    }
    uint32_t seats = (uint32_t)(n - 1 < tp->n_workers ? n - 1 : tp->n_workers);
    tp->job = &j;
    atomic_store(&tp->pending, (int)seats);
    uint64_t s = atomic_load(&tp->state);
    pthread_mutex_lock(&tp->mu); /* a worker going to sleep checks state under mu */
    uint64_t gen = (uint32_t)((s >> 32) + 1) ? (s >> 32) + 1 : 1; /* never 0: 0 means stop */
    atomic_store_explicit(&tp->state, gen << 32 | seats, memory_order_release);
    if (tp->sleepers) pthread_cond_broadcast(&tp->wake);
    pthread_mutex_unlock(&tp->mu);
    run_parts(&j);
    /* every slice is taken: the seats nobody took are closed */
    s = atomic_load(&tp->state);
    while ((uint32_t)s &&
           !atomic_compare_exchange_weak(&tp->state, &s, s & ~(uint64_t)UINT32_MAX)) {
    }
    if ((uint32_t)s) atomic_fetch_sub(&tp->pending, (int)(uint32_t)s);
    struct timespec t0;
    for (int polls = 0; atomic_load(&tp->pending) > 0 && keep_polling(&polls, &t0);) {
    }
    if (atomic_load(&tp->pending) > 0) {
        pthread_mutex_lock(&tp->mu);
        while (atomic_load(&tp->pending) > 0) pthread_cond_wait(&tp->done, &tp->mu);
        pthread_mutex_unlock(&tp->mu);
    }
    tp->job = NULL;
    atomic_store(&tp->busy, false);
    return TC_OK;
}

/* calls fn(bufs[0], ..., bufs[n_bufs-1]); of dims only cpu_range counts (the
 * loops are in the code). The argument array lives on this call's stack (or
 * heap, past ARGS_ON_STACK), so launches of a prepared program share no
 * mutable state. */
TC_MUST_USE static tc_status cpu_launch(tc_dev *d, tc_program *p, void **bufs, int n_bufs,
                            const tc_launch_dims *dims) {
    (void)d;
    int64_t split = dims ? dims->cpu_range : 0;
    if (!p) return tc_error_set(TC_ERR_INVALID, "CPU launch: program is NULL");
    if (n_bufs < 0 || (n_bufs > 0 && !bufs))
        return tc_error_set(TC_ERR_INVALID, "CPU launch of '%s': bad arguments (%d buffers at %p)",
                            p->fn_name, n_bufs, (void *)bufs);
    int n_args = n_bufs + (split > 0);
    if (p->n_args != n_args && prepare_cif(p, n_args) != TC_OK) return tc_error_code();
    if (split > 0) return launch_split(p, bufs, n_bufs, split);
    void *stack[ARGS_ON_STACK];
    void **values = n_bufs <= ARGS_ON_STACK ? stack : tc_malloc((size_t)n_bufs * sizeof *values);
    if (!values) return TC_ERR_MEMORY;
    for (int i = 0; i < n_bufs; i++) values[i] = &bufs[i];
    ffi_call(&p->cif, FFI_FN(p->fn), NULL, values);
    if (values != stack) tc_free(values);
    return TC_OK;
}

TC_MUST_USE static tc_status cpu_synchronize(tc_dev *d) {
    (void)d;
    return TC_OK;
}

static void cpu_close(tc_dev *d) {
    pool_shutdown();
    cpu_ctx *ctx = d->ctx;
    for (int i = 0; i < ctx->programs.n; i++) program_free(ctx->programs.items[i]);
    tc_ptrvec_free(&ctx->programs);
    tc_cpu_checked_free(&ctx->checked);
    tc_cpu_heap_release(&ctx->heap);
    tc_free(ctx);
    tc_free(d);
}

tc_dev *tc_cpu_device_create(int id) {
    tc_dev *d = tc_calloc(1, sizeof *d);
    cpu_ctx *ctx = d ? tc_calloc(1, sizeof *ctx) : NULL;
    if (!ctx) {
        tc_free(d);
        return NULL;
    }
    snprintf(d->name, sizeof d->name, "CPU");
    d->id = id;
    d->ctx = ctx;
    d->dialect = &tc_dialect_c;
    char info[512];
    if (tc_cpu_target(&d->target, info, sizeof info) != TC_OK) {
        tc_free(ctx);
        tc_free(d);
        return NULL;
    }
    if (tc_flag_get(TC_FLAG_DEBUG) >= 1) fprintf(stderr, "device CPU: %s\n", info);
    d->alloc = cpu_alloc;
    d->free = cpu_free;
    d->pool_min = HEAP_MIN;
    d->trim = cpu_trim;
    d->copyin = cpu_copyin;
    d->copyout = cpu_copyout;
    d->compile = cpu_compile;
    d->prebuild = cpu_prebuild;
    d->launch = cpu_launch;
    d->synchronize = cpu_synchronize;
    d->close = cpu_close;
    return d;
}

int tc_cpu_pool_workers(void) {
    pthread_mutex_lock(&pool_init_mu);
    int n = pool && pool->pid == getpid() ? pool->n_workers : 0;
    pthread_mutex_unlock(&pool_init_mu);
    return n;
}
