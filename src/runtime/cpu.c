/* cpu.c - the CPU device: host memory, and C source -> shared object -> call.
 *
 * Memory: 64-byte aligned blocks from the util allocator (so the failing
 * allocator reaches them too); copies are memcpy.
 * compile: source -> key = tc_hash_hex(compiler, flags, source). Programs
 * (dlopen handle + entry point + libffi call interface) are kept in the
 * device by (key, fn_name), so a source is loaded once per process. On a
 * miss <tc_cachedir()>/<key>.so is dlopen'ed; if it is absent (or does not
 * load) the source goes to a temp file in the cache dir, the system compiler
 * (TC_CC, else cc) builds a temp .so with its messages in a log file, and
 * rename() publishes the .so atomically: processes that race each write a
 * complete .so and the last rename wins. Every temp file is removed on every
 * path. prebuild does the same for the new kernels of a schedule, running as
 * many compilers at once as there are cores.
 * launch: fn(bufs...) through libffi, every argument a pointer; a split
 * kernel's slices run on a thread pool (see "threads" below).
 * The device owns its programs; close dlcloses and frees them. Callers
 * serialize compile, close and a program's first launch with a new argument
 * count (the API lock); launches keep their argument array on their stack.
 */
#include "runtime/runtime.h"

#include <dlfcn.h>
#include <errno.h>
#include <fcntl.h>
#include <ffi.h>
#include <spawn.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdlib.h>
#include <pthread.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

extern char **environ; /* passed to the compiler */

#define CPU_ALIGN     64   /* alignment of every buffer, in bytes */
#define LOG_MAX       1500 /* compiler log bytes quoted in an error message */
#define MAX_CC_WORDS  8    /* words in TC_CC ("ccache cc" is two) */
#define ARGS_ON_STACK 128  /* buffers a split launch takes (a plain launch past it allocates) */

/* compiler flags, part of the cache key; the file arguments follow them */
static const char *const cc_flags[] = {
    "-O2", "-march=native", "-fno-predictive-commoning", "-fPIC", "-shared", "-fno-math-errno", "-fwrapv", "-fexcess-precision=standard", "-std=gnu11", NULL};

static int64_t compile_count; /* compiler invocations in this process */

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
    tc_ptrvec programs; /* tc_program *, owned; looked up by (key, fn_name) */
} cpu_ctx;

/* ---- memory --------------------------------------------------------------- */

/* nbytes (0 is fine) aligned to CPU_ALIGN; the raw block's address sits in
 * the word just below the returned pointer */
static void *cpu_alloc(tc_dev *d, size_t nbytes) {
    (void)d;
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
    (void)d;
    if (ptr) tc_free(((void **)ptr)[-1]);
}

static tc_status cpu_copyin(tc_dev *d, void *dst, size_t offset, const void *src, size_t nbytes) {
    (void)d;
    if (nbytes) memmove((char *)dst + offset, src, nbytes);
    return TC_OK;
}

static tc_status cpu_copyout(tc_dev *d, void *dst, const void *src, size_t offset,
                             size_t nbytes) {
    (void)d;
    if (nbytes) memmove(dst, (const char *)src + offset, nbytes);
    return TC_OK;
}

/* ---- files ---------------------------------------------------------------- */

/* a new tc_malloc'ed string from a format; NULL with TC_ERR_MEMORY set */
static char *fmt_alloc(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
static char *fmt_alloc(const char *fmt, ...) {
    tc_strbuf b = {0};
    va_list ap;
    va_start(ap, fmt);
    tc_sb_vprintf(&b, fmt, ap);
    va_end(ap);
    if (b.failed || !b.s) {
        tc_sb_free(&b);
        tc_error_set(TC_ERR_MEMORY, "CPU compile: out of memory building a path");
        return NULL;
    }
    return b.s;
}

/* mkdir -p with mode 0700 for the directories it creates */
static tc_status make_dirs(const char *path) {
    if (!*path) return tc_error_set(TC_ERR_IO, "CPU compile: the cache directory name is empty");
    char *p = tc_strdup(path);
    if (!p) return TC_ERR_MEMORY;
    tc_status st = TC_OK;
    for (char *s = p + 1; st == TC_OK; s++) {
        char c = *s;
        if (c != '/' && c != '\0') continue;
        *s = '\0';
        if (mkdir(p, 0700) != 0 && errno != EEXIST)
            st = tc_error_set(TC_ERR_IO, "CPU compile: cannot create cache directory '%s': %s", p,
                              strerror(errno));
        *s = c;
        if (c == '\0') break;
    }
    struct stat sb;
    if (st == TC_OK && (stat(path, &sb) != 0 || !S_ISDIR(sb.st_mode)))
        st = tc_error_set(TC_ERR_IO, "CPU compile: cache directory '%s' is not a directory", path);
    tc_free(p);
    return st;
}

/* creates a unique "<dir>/<key>-XXXXXX.c" holding src; returns its path */
static char *write_temp_source(const char *dir, const char *key, const char *src) {
    char *path = fmt_alloc("%s/%s-XXXXXX.c", dir, key);
    if (!path) return NULL;
    int fd = mkstemps(path, 2);
    if (fd < 0) {
        tc_error_set(TC_ERR_IO, "CPU compile: cannot create a temp file in '%s': %s", dir,
                     strerror(errno));
        tc_free(path);
        return NULL;
    }
    size_t n = strlen(src), done = 0;
    while (done < n) {
        ssize_t w = write(fd, src + done, n - done);
        if (w < 0 && errno == EINTR) continue;
        if (w <= 0) break;
        done += (size_t)w;
    }
    int err = done < n ? errno : 0;
    if (close(fd) != 0 && !err) err = errno;
    if (done < n || err) {
        tc_error_set(TC_ERR_IO, "CPU compile: cannot write '%s': %s", path,
                     strerror(err ? err : EIO));
        unlink(path);
        tc_free(path);
        return NULL;
    }
    return path;
}

/* the first LOG_MAX bytes of the file at path, NUL-terminated, into buf */
static void read_log(const char *path, char buf[LOG_MAX + 16]) {
    buf[0] = '\0';
    int fd = open(path, O_RDONLY);
    if (fd < 0) return;
    size_t n = 0;
    while (n < LOG_MAX) {
        ssize_t r = read(fd, buf + n, LOG_MAX - n);
        if (r < 0 && errno == EINTR) continue;
        if (r <= 0) break;
        n += (size_t)r;
    }
    char more;
    bool is_cut = n == LOG_MAX && read(fd, &more, 1) == 1;
    close(fd);
    while (n > 0 && (buf[n - 1] == '\n' || buf[n - 1] == ' ')) n--;
    strcpy(buf + n, is_cut ? "\n[...]" : "");
}

/* ---- the compiler ----------------------------------------------------------- */

/* TC_CC, else "cc": a tc_malloc'ed copy, split in place into words */
static char *compiler_words(char *words[MAX_CC_WORDS + 1], int *n_words) {
    const char *cc = getenv("TC_CC");
    char *copy = tc_strdup(cc && *cc ? cc : "cc");
    if (!copy) return NULL;
    int n = 0;
    char *save = NULL;
    for (char *s = strtok_r(copy, " \t", &save); s && n < MAX_CC_WORDS;
         s = strtok_r(NULL, " \t", &save))
        words[n++] = s;
    if (n == 0) words[n++] = "cc";
    words[n] = NULL;
    *n_words = n;
    return copy;
}

/* the cache key: hash of the compiler words, the flags and the source */
static tc_status cache_key(const char *src, char key[33]) {
    char *words[MAX_CC_WORDS + 1];
    int n_words;
    char *cc = compiler_words(words, &n_words);
    if (!cc) return TC_ERR_MEMORY;
    tc_strbuf b = {0};
    for (int i = 0; i < n_words; i++) tc_sb_printf(&b, "%s ", words[i]);
    tc_sb_printf(&b, "\n");
    for (int i = 0; cc_flags[i]; i++) tc_sb_printf(&b, "%s ", cc_flags[i]);
    tc_sb_printf(&b, "\n%s", src);
    tc_free(cc);
    if (b.failed || !b.s) {
        tc_sb_free(&b);
        return tc_error_set(TC_ERR_MEMORY, "CPU compile: out of memory hashing the source");
    }
    tc_hash_hex(b.s, b.len, key);
    tc_sb_free(&b);
    return TC_OK;
}

/* a compiler run: its temp files, the .so it publishes and its process */
typedef struct {
    char *c_path;      /* "<dir>/<key>-XXXXXX.c": the source (owned) */
    char *tmp_so;      /* the same stem + ".so": the compiler's output (owned) */
    char *log_path;    /* the same stem + ".log": its messages (owned) */
    char *so_path;     /* "<dir>/<key>.so": where the output is published (owned) */
    char *fn_name;     /* the kernel, for messages (owned) */
    char *cc;          /* TC_CC's words (owned) */
    const char *argv0; /* the compiler's name (in cc) */
    pid_t pid;         /* the compiler's process; 0 when not running */
} cc_job;

/* removes the temp files and frees the job's strings */
static void job_clear(cc_job *j) {
    if (j->c_path) unlink(j->c_path);
    if (j->log_path) unlink(j->log_path);
    if (j->tmp_so) unlink(j->tmp_so); /* gone already when the rename worked */
    tc_free(j->c_path), tc_free(j->tmp_so), tc_free(j->log_path);
    tc_free(j->so_path), tc_free(j->fn_name), tc_free(j->cc);
    memset(j, 0, sizeof *j);
}

/* writes src to a temp file in dir and starts the compiler on it, stdin from
 * /dev/null and stdout+stderr into the log; on failure the job is cleared */
static tc_status job_start(cc_job *j, const char *dir, const char *key, const char *src,
                           const char *fn_name) {
    memset(j, 0, sizeof *j);
    j->c_path = write_temp_source(dir, key, src);
    if (!j->c_path) return tc_error_code();
    size_t stem = strlen(j->c_path) - 2; /* without ".c" */
    j->tmp_so = fmt_alloc("%.*s.so", (int)stem, j->c_path);
    j->log_path = j->tmp_so ? fmt_alloc("%.*s.log", (int)stem, j->c_path) : NULL;
    j->so_path = j->log_path ? fmt_alloc("%s/%s.so", dir, key) : NULL;
    j->fn_name = j->so_path ? tc_strdup(fn_name) : NULL;
    char *words[MAX_CC_WORDS + 1];
    int n = 0;
    j->cc = j->fn_name ? compiler_words(words, &n) : NULL;
    if (!j->cc) {
        job_clear(j);
        return TC_ERR_MEMORY;
    }
    j->argv0 = words[0];
    const char *argv[MAX_CC_WORDS + 16];
    int k = 0;
    for (int i = 0; i < n; i++) argv[k++] = words[i];
    for (int i = 0; cc_flags[i]; i++) argv[k++] = cc_flags[i];
    const char *tail[] = {"-x", "c", j->c_path, "-o", j->tmp_so, "-lm", NULL};
    for (int i = 0; i < 7; i++) argv[k++] = tail[i];
    posix_spawn_file_actions_t fa;
    int rc = posix_spawn_file_actions_init(&fa);
    if (rc != 0) {
        job_clear(j);
        return tc_error_set(TC_ERR_MEMORY, "CPU compile: posix_spawn: %s", strerror(rc));
    }
    rc = posix_spawn_file_actions_addopen(&fa, 0, "/dev/null", O_RDONLY, 0);
    if (!rc)
        rc = posix_spawn_file_actions_addopen(&fa, 2, j->log_path, O_WRONLY | O_CREAT | O_TRUNC,
                                              0600);
    if (!rc) rc = posix_spawn_file_actions_adddup2(&fa, 2, 1);
    if (!rc) rc = posix_spawnp(&j->pid, argv[0], &fa, NULL, (char *const *)argv, environ);
    posix_spawn_file_actions_destroy(&fa);
    if (rc != 0) {
        tc_error_set(TC_ERR_COMPILE, "CPU compile of '%s': cannot run the compiler '%s': %s",
                     fn_name, argv[0], strerror(rc));
        job_clear(j);
        return TC_ERR_COMPILE;
    }
    compile_count++;
    return TC_OK;
}

/* waits for the compiler; when it succeeded, renames its output to so_path.
 * A failure is TC_ERR_COMPILE quoting the log. Clears the job. */
static tc_status job_finish(cc_job *j) {
    int status = 0;
    tc_status st = TC_OK;
    while (waitpid(j->pid, &status, 0) < 0) {
        if (errno == EINTR) continue;
        if (errno != ECHILD) /* ECHILD: the host reaps children: the output decides */
            st = tc_error_set(TC_ERR_COMPILE, "CPU compile of '%s': waitpid: %s", j->fn_name,
                              strerror(errno));
        status = 0;
        break;
    }
    char log[LOG_MAX + 16];
    if (st == TC_OK && !(WIFEXITED(status) && WEXITSTATUS(status) == 0)) {
        read_log(j->log_path, log);
        st = tc_error_set(TC_ERR_COMPILE, "CPU compile of '%s' failed (%s %s %d):\n%s", j->fn_name,
                          j->argv0, WIFEXITED(status) ? "exited with status" : "killed by signal",
                          WIFEXITED(status) ? WEXITSTATUS(status) : WTERMSIG(status), log);
    }
    if (st == TC_OK && rename(j->tmp_so, j->so_path) != 0) {
        int err = errno;
        read_log(j->log_path, log);
        if (err == ENOENT)
            st = tc_error_set(TC_ERR_COMPILE,
                              "CPU compile of '%s': the compiler wrote no output:\n%s", j->fn_name,
                              log[0] ? log : "(and printed nothing)");
        else
            st = tc_error_set(TC_ERR_IO, "CPU compile: cannot rename '%s' to '%s': %s", j->tmp_so,
                              j->so_path, strerror(err));
    }
    job_clear(j);
    return st;
}

/* writes src to a temp file in dir, compiles it and publishes <dir>/<key>.so */
static tc_status build_so(const char *dir, const char *key, const char *src, const char *fn_name) {
    cc_job j;
    tc_status st = job_start(&j, dir, key, src, fn_name);
    return st == TC_OK ? job_finish(&j) : st;
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

/* dlopens so_path (built when missing or unloadable) and finds fn_name */
static tc_status load_so(const char *dir, const char *key, const char *src, const char *so_path,
                         const char *fn_name, void **handle, void **fn) {
    *handle = access(so_path, F_OK) == 0 ? dlopen(so_path, RTLD_NOW | RTLD_LOCAL) : NULL;
    if (!*handle) {
        tc_status st = build_so(dir, key, src, fn_name);
        if (st != TC_OK) return st;
        *handle = dlopen(so_path, RTLD_NOW | RTLD_LOCAL);
        if (!*handle) {
            const char *why = dlerror();
            return tc_error_set(TC_ERR_COMPILE, "CPU compile of '%s': cannot load '%s': %s",
                                fn_name, so_path, why ? why : "unknown error");
        }
    }
    *fn = dlsym(*handle, fn_name);
    if (!*fn) {
        dlclose(*handle);
        *handle = NULL;
        return tc_error_set(TC_ERR_COMPILE, "CPU compile: the source has no function '%s'",
                            fn_name);
    }
    return TC_OK;
}

/* a new program for (key, fn_name), loaded or compiled; NULL with an error */
static tc_program *program_new(const char *key, const char *src, const char *fn_name) {
    const char *dir = tc_cachedir();
    if (!dir) {
        if (tc_error_code() == TC_OK) tc_error_set(TC_ERR_IO, "CPU compile: no cache directory");
        return NULL;
    }
    char *so_path = fmt_alloc("%s/%s.so", dir, key);
    tc_program *p = so_path ? tc_calloc(1, sizeof *p) : NULL;
    if (!p) {
        tc_free(so_path);
        return NULL;
    }
    memcpy(p->key, key, 33);
    p->n_args = -1;
    p->fn_name = tc_strdup(fn_name);
    tc_status st = p->fn_name ? make_dirs(dir) : TC_ERR_MEMORY;
    if (st == TC_OK) st = load_so(dir, key, src, so_path, fn_name, &p->handle, &p->fn);
    tc_free(so_path);
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
    if (cache_key(src, key) != TC_OK) return NULL;
    tc_program *p = find_program(ctx, key, fn_name);
    if (p) return p;
    p = program_new(key, src, fn_name);
    if (p && tc_ptrvec_push(&ctx->programs, p) != TC_OK) {
        program_free(p);
        return NULL;
    }
    return p;
}

#define MAX_JOBS 64 /* compilers running at once, at most */

/* builds the .so of every source that is neither loaded nor cached on disk,
 * as many compilers at once as there are cores. A source that fails to
 * build here is compiled again by compile, which reports the error; only
 * running out of memory is an error here. */
static tc_status cpu_prebuild(tc_dev *d, const char *const *srcs, const char *const *fn_names,
                              int n) {
    cpu_ctx *ctx = d->ctx;
    const char *dir = n >= 2 ? tc_cachedir() : NULL;
    if (!dir || make_dirs(dir) != TC_OK) { /* nothing to gain, or compile will say why */
        tc_error_clear();
        return TC_OK;
    }
    long cores = sysconf(_SC_NPROCESSORS_ONLN);
    int max_jobs = cores < 1 ? 1 : cores > MAX_JOBS ? MAX_JOBS : (int)cores;
    cc_job jobs[MAX_JOBS];
    char(*keys)[33] = tc_malloc((size_t)n * sizeof *keys);
    if (!keys) return TC_ERR_MEMORY;
    tc_status st = TC_OK;
    int head = 0, n_running = 0; /* jobs[(head + i) % max_jobs], i < n_running, run */
    for (int i = 0; i < n && st == TC_OK; i++) {
        keys[i][0] = '\0';
        if (!srcs[i] || !fn_names[i] || (st = cache_key(srcs[i], keys[i])) != TC_OK) continue;
        bool is_known = false;
        for (int k = 0; k < i && !is_known; k++) is_known = strcmp(keys[k], keys[i]) == 0;
        for (int k = 0; k < ctx->programs.n && !is_known; k++)
            is_known = strcmp(((tc_program *)ctx->programs.items[k])->key, keys[i]) == 0;
        if (is_known) continue;
        char *so_path = fmt_alloc("%s/%s.so", dir, keys[i]);
        if (!so_path) st = TC_ERR_MEMORY;
        bool is_cached = so_path && access(so_path, F_OK) == 0;
        tc_free(so_path);
        if (!so_path || is_cached) continue;
        if (n_running == max_jobs) { /* wait for the oldest */
            job_finish(&jobs[head]);
            head = (head + 1) % max_jobs;
            n_running--;
        }
        cc_job *j = &jobs[(head + n_running) % max_jobs];
        tc_status js = job_start(j, dir, keys[i], srcs[i], fn_names[i]);
        if (js == TC_OK) n_running++;
        else if (js == TC_ERR_MEMORY) st = js;
    }
    for (; n_running > 0; n_running--, head = (head + 1) % max_jobs) job_finish(&jobs[head]);
    tc_free(keys);
    if (st == TC_OK) tc_error_clear(); /* failed builds: compile reports them */
    else tc_error_set(TC_ERR_MEMORY, "CPU compile: out of memory building kernels");
    return st;
}

/* (re)builds p's call interface for n pointer arguments */
static tc_status prepare_cif(tc_program *p, int n) {
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
#define SPIN_ROUNDS 4000 /* polls (tens of microseconds) before a thread sleeps */

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
 * then a sleep on a condition variable (`sleepers` says who sleeps). */
typedef struct {
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

/* the next state whose generation is not seen (spinning, then sleeping);
 * 0 when the pool stops */
static uint64_t next_generation(thread_pool *tp, uint32_t seen) {
    for (int i = 0; i < SPIN_ROUNDS; i++) {
        uint64_t s = atomic_load_explicit(&tp->state, memory_order_acquire);
        if (atomic_load_explicit(&tp->stop, memory_order_relaxed)) return 0;
        if ((uint32_t)(s >> 32) != seen) return s;
        cpu_relax();
    }
    pthread_mutex_lock(&tp->mu);
    tp->sleepers++;
    uint64_t s = 0;
    while (!atomic_load(&tp->stop) && (uint32_t)((s = atomic_load(&tp->state)) >> 32) == seen)
        pthread_cond_wait(&tp->wake, &tp->mu);
    tp->sleepers--;
    pthread_mutex_unlock(&tp->mu);
    return atomic_load(&tp->stop) ? 0 : s;
}

static void *worker_main(void *arg) {
    thread_pool *tp = arg;
    uint32_t seen = 0;
    for (;;) {
        uint64_t s = next_generation(tp, seen);
        if (!s) return NULL;
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
            for (int i = 0; i < n; i++) {
                if (pthread_create(&tp->tids[tp->n_workers], NULL, worker_main, tp) != 0) break;
                tp->n_workers++;
            }
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

static tc_status launch_split(tc_program *p, void **bufs, int n_bufs, int64_t steps) {
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
    for (int i = 0; i < SPIN_ROUNDS && atomic_load(&tp->pending) > 0; i++) cpu_relax();
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
static tc_status cpu_launch(tc_dev *d, tc_program *p, void **bufs, int n_bufs,
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

static tc_status cpu_synchronize(tc_dev *d) {
    (void)d;
    return TC_OK;
}

static void cpu_close(tc_dev *d) {
    pool_shutdown();
    cpu_ctx *ctx = d->ctx;
    for (int i = 0; i < ctx->programs.n; i++) program_free(ctx->programs.items[i]);
    tc_ptrvec_free(&ctx->programs);
    tc_free(ctx);
    tc_free(d);
}

/* the SIMD registers kernels compiled with -march=native get on this CPU */
static void host_simd(tc_target *t) {
#if defined(__GNUC__) && (defined(__x86_64__) || defined(__i386__))
    if (__builtin_cpu_supports("avx512f")) t->simd_floats = 16, t->simd_regs = 32;
    else if (__builtin_cpu_supports("avx")) t->simd_floats = 8, t->simd_regs = 16;
    else t->simd_floats = 4, t->simd_regs = 16;
#else
    t->simd_floats = 4, t->simd_regs = 32; /* NEON-class */
#endif
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
    tc_cpu_target(&d->target);
    d->alloc = cpu_alloc;
    d->free = cpu_free;
    d->copyin = cpu_copyin;
    d->copyout = cpu_copyout;
    d->compile = cpu_compile;
    d->prebuild = cpu_prebuild;
    d->launch = cpu_launch;
    d->synchronize = cpu_synchronize;
    d->close = cpu_close;
    return d;
}

void tc_cpu_target(tc_target *t) {
    *t = tc_dialect_c.target;
    host_simd(t);
}

int64_t tc_cpu_compile_count(void) {
    return compile_count;
}

int tc_cpu_pool_workers(void) {
    pthread_mutex_lock(&pool_init_mu);
    int n = pool && pool->pid == getpid() ? pool->n_workers : 0;
    pthread_mutex_unlock(&pool_init_mu);
    return n;
}
