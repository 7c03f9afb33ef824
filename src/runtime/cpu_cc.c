/* cpu_cc.c - C sources -> shared objects in the kernel cache, by the system
 * compiler (TC_CC, else cc), and finding them there again (layout: cpu.h).
 *
 * One compiler run: the text goes to a temp file in the cache dir, the
 * compiler writes a temp .so with its messages in a log file, the .so gets
 * its seal (cache.c) and rename() publishes it atomically: processes that
 * race each write a complete file and the last rename wins. An empty
 * directory in the way is removed first; a full one keeps the name and a
 * kernel built alone is then loaded from its temp .so (cpu.h). Finding an
 * entry checks its seal (its size and a sum of every byte: 7 to 14 us for
 * a 15 KB kernel's .so, a fifth of its dlopen; cache.c) before anything
 * loads it, once per version of the file in a process. Every temp file is
 * removed on every path.
 * A run past TC_CC_TIMEOUT is killed with its process group; while a limit
 * is set the wait for it polls (0.2 ms doubling to 10 ms: at most 10 ms
 * after the compiler exits).
 *
 * Batches: most of a small kernel's compile is the compiler starting and
 * reading the prelude (about 45 ms a run on a 2-core Zen 2; the same
 * kernels as functions of one translation unit cost about 1 ms more each),
 * so the new kernels of a schedule are built as one translation unit per
 * compiler running at once, and as fewer units when the kernels are too
 * small to pay for another compiler's start (CC_START_BYTES). cut_source
 * splits a source into prelude items (top-level declarations and #if
 * groups, cut at line ends) and the kernel;
 * the batch holds each distinct item once, then each kernel between
 * "#define <fn_name> <fn_name>__<key>" and "#undef <fn_name>". A source is
 * batched only when that cannot change what it means: its prelude declares
 * no object (a shared one would then be shared by every kernel of the
 * batch), no function-local static, no macro and no pragma, and two items
 * that define one name differently fail to compile, which builds the
 * batch's kernels one a run instead. Cost: linear in the sources' length
 * for the cut, items x distinct items (compared by hash first) for the
 * batch; one compiler run per batch.
 */
#include "runtime/cpu.h"

#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <spawn.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

extern char **environ; /* passed to the compiler */

#define LOG_MAX      1500 /* compiler log bytes quoted in an error message */
#define MAX_CC_WORDS 8    /* words in TC_CC ("ccache cc" is two) */
#define MAX_JOBS     64   /* compilers running at once, at most */
/* the kernel source (bytes, prelude not counted) gcc compiles in about the
 * time it takes to start: gcc 12 at -O2 on the diff corpus, 89 ms a run
 * plus 12 ms a KB of source (Zen 5; a ratio of two compile times, so about
 * the same on a faster or slower CPU): about 7 KB */
#define CC_START_BYTES 8192

/* compiler flags, part of the cache key; the file arguments follow them
 * (CMakeLists.txt reads them for bench/stream.c) */
/* clang-format off */
static const char *const cc_flags[] = {
    "-O2", "-march=native", "-fno-predictive-commoning", "-fPIC", "-shared", "-fno-math-errno", "-fwrapv", "-fexcess-precision=standard", "-std=gnu11", NULL};
/* clang-format on */

/* TC_CPU_ISA=avx2 holds the compiler to AVX2 too (the words it adds after
 * cc_flags into w, their count): a plan for AVX2's 16 registers compiled
 * with -march=native on an AVX-512 host got AVX-512VL's 32 ymm registers,
 * so the AVX2 figures measured here were not a Zen 3's. sse2 and avx stay
 * plans only: without FMA, src/render/cmath.c's range reductions lose
 * accuracy (sin at |x| near 1e6 within 0.03, not 2e-5: render_test_cmath),
 * and the machines this library targets all have it. Part of the key. */
static int isa_words(const char *w[1]) {
    const char *v = getenv("TC_CPU_ISA");
    if (v && !strcasecmp(v, "avx2")) return w[0] = "-mno-avx512f", 1;
    return 0;
}

static int64_t compile_count; /* compiler runs in this process */
static int64_t build_count;   /* kernels those runs built (a batch counts its kernels) */

int64_t tc_cpu_compile_count(void) {
    return compile_count;
}

int64_t tc_cpu_build_count(void) {
    return build_count;
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

char *tc_cpu_cc_path(const char *dir, const char *name, const char *ext) {
    return fmt_alloc("%s/%s%s", dir, name, ext);
}

TC_MUST_USE tc_status tc_cpu_cc_make_dirs(const char *path) {
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

/* creates a unique "<dir>/<stem>-XXXXXX<ext>" holding text; returns its path */
static char *write_temp(const char *dir, const char *stem, const char *ext, const char *text) {
    char *path = fmt_alloc("%s/%s-XXXXXX%s", dir, stem, ext);
    if (!path) return NULL;
    int fd = mkstemps(path, (int)strlen(ext));
    if (fd < 0) {
        tc_error_set(TC_ERR_IO, "CPU compile: cannot create a temp file in '%s': %s", dir,
                     strerror(errno));
        tc_free(path);
        return NULL;
    }
    size_t n = strlen(text), done = 0;
    while (done < n) {
        ssize_t w = write(fd, text + done, n - done);
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

/* the first max bytes of the file at path, NUL-terminated, into buf (max +
 * 16 bytes); is_cut says whether more followed */
static size_t read_head(const char *path, char *buf, size_t max, bool *is_cut) {
    buf[0] = '\0';
    *is_cut = false;
    int fd = open(path, O_RDONLY);
    if (fd < 0) return 0;
    size_t n = 0;
    while (n < max) {
        ssize_t r = read(fd, buf + n, max - n);
        if (r < 0 && errno == EINTR) continue;
        if (r <= 0) break;
        n += (size_t)r;
    }
    char more;
    *is_cut = n == max && read(fd, &more, 1) == 1;
    close(fd);
    buf[n] = '\0';
    return n;
}

/* the compiler's log for a message: its first LOG_MAX bytes, trailing blanks cut */
static void read_log(const char *path, char buf[LOG_MAX + 16]) {
    bool is_cut;
    size_t n = read_head(path, buf, LOG_MAX, &is_cut);
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

TC_MUST_USE tc_status tc_cpu_cc_key(const char *src, char key[33]) {
    char *words[MAX_CC_WORDS + 1];
    int n_words;
    char *cc = compiler_words(words, &n_words);
    if (!cc) return TC_ERR_MEMORY;
    tc_strbuf b = {0};
    for (int i = 0; i < n_words; i++) tc_sb_printf(&b, "%s ", words[i]);
    tc_sb_printf(&b, "\n");
    for (int i = 0; cc_flags[i]; i++) tc_sb_printf(&b, "%s ", cc_flags[i]);
    const char *isa[1];
    for (int i = 0, n = isa_words(isa); i < n; i++) tc_sb_printf(&b, "%s ", isa[i]);
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
    char *what;        /* "'fn'" or "a batch of N kernels", for messages (owned) */
    char key[33];      /* the key of the text: its entry's name and seal */
    char *cc;          /* TC_CC's words (owned) */
    const char *argv0; /* the compiler's name (in cc) */
    pid_t pid;         /* the compiler's process (and process group); 0 when not running */
    double deadline;   /* tc_time_now() past which it is killed; 0: no limit */
} cc_job;

/* seconds one compiler run may take: TC_CC_TIMEOUT, default 600 (0 or
 * less: no limit) */
static double cc_timeout(void) {
    const char *e = getenv("TC_CC_TIMEOUT");
    char *end = NULL;
    double t = e && *e ? strtod(e, &end) : 600;
    return e && *e && (!end || *end) ? 600 : t;
}

/* removes the temp files and frees the job's strings */
static void job_clear(cc_job *j) {
    if (j->c_path) unlink(j->c_path);
    if (j->log_path) unlink(j->log_path);
    if (j->tmp_so) unlink(j->tmp_so); /* gone already when the rename worked */
    tc_free(j->c_path), tc_free(j->tmp_so), tc_free(j->log_path);
    tc_free(j->so_path), tc_free(j->what), tc_free(j->cc);
    memset(j, 0, sizeof *j);
}

/* posix_spawn of argv with stdin from /dev/null and stdout+stderr into
 * log, in a process group of its own (so that a compiler past its time
 * limit is killed with cc1, as and ld) */
static int spawn_logged(pid_t *pid, const char *const *argv, const char *log) {
    posix_spawn_file_actions_t fa;
    posix_spawnattr_t attr;
    int rc = posix_spawn_file_actions_init(&fa);
    if (rc != 0) return rc;
    rc = posix_spawnattr_init(&attr);
    if (rc != 0) {
        posix_spawn_file_actions_destroy(&fa);
        return rc;
    }
    rc = posix_spawnattr_setflags(&attr, POSIX_SPAWN_SETPGROUP);
    if (!rc) rc = posix_spawnattr_setpgroup(&attr, 0);
    if (!rc) rc = posix_spawn_file_actions_addopen(&fa, 0, "/dev/null", O_RDONLY, 0);
    if (!rc) rc = posix_spawn_file_actions_addopen(&fa, 2, log, O_WRONLY | O_CREAT | O_TRUNC, 0600);
    if (!rc) rc = posix_spawn_file_actions_adddup2(&fa, 2, 1);
    if (!rc) rc = posix_spawnp(pid, argv[0], &fa, &attr, (char *const *)argv, environ);
    posix_spawnattr_destroy(&attr);
    posix_spawn_file_actions_destroy(&fa);
    return rc;
}

/* waits for j's compiler to exit, into *status; past j->deadline kills its
 * process group and sets *killed. Polls (0.2 ms, doubling to 10 ms) while a
 * deadline is set. -1 with errno when waitpid fails */
static int wait_job(cc_job *j, int *status, bool *killed) {
    long nap_us = 200;
    for (;;) {
        pid_t r = waitpid(j->pid, status, j->deadline > 0 ? WNOHANG : 0);
        if (r == j->pid) return 0;
        if (r < 0 && errno == EINTR) continue;
        if (r < 0) return -1;
        if (tc_time_now() > j->deadline) {
            kill(-j->pid, SIGKILL);
            *killed = true;
            while (waitpid(j->pid, status, 0) < 0)
                if (errno != EINTR) return -1;
            return 0;
        }
        usleep((useconds_t)nap_us);
        if (nap_us < 10000) nap_us *= 2;
    }
}

/* writes text to a temp file in dir and starts the compiler on it, its
 * output to be published as <dir>/<key>.so; on failure the job is cleared */
TC_MUST_USE static tc_status job_start(cc_job *j, const char *dir, const char *key, const char *text,
                           const char *what) {
    memset(j, 0, sizeof *j);
    snprintf(j->key, sizeof j->key, "%s", key);
    j->c_path = write_temp(dir, key, ".c", text);
    if (!j->c_path) return tc_error_code();
    size_t stem = strlen(j->c_path) - 2; /* without ".c" */
    j->tmp_so = fmt_alloc("%.*s.so", (int)stem, j->c_path);
    j->log_path = j->tmp_so ? fmt_alloc("%.*s.log", (int)stem, j->c_path) : NULL;
    j->so_path = j->log_path ? tc_cpu_cc_path(dir, key, ".so") : NULL;
    j->what = j->so_path ? tc_strdup(what) : NULL;
    char *words[MAX_CC_WORDS + 1];
    int n = 0;
    j->cc = j->what ? compiler_words(words, &n) : NULL;
    if (!j->cc) {
        job_clear(j);
        return TC_ERR_MEMORY;
    }
    j->argv0 = words[0];
    const char *argv[MAX_CC_WORDS + 32]; /* words, cc_flags, ISA words, the files */
    int k = 0;
    for (int i = 0; i < n; i++) argv[k++] = words[i];
    for (int i = 0; cc_flags[i]; i++) argv[k++] = cc_flags[i];
    const char *isa[1];
    for (int i = 0, n_isa = isa_words(isa); i < n_isa; i++) argv[k++] = isa[i];
    const char *tail[] = {"-x", "c", j->c_path, "-o", j->tmp_so, "-lm", NULL};
    for (int i = 0; i < 7; i++) argv[k++] = tail[i];
    int rc = spawn_logged(&j->pid, argv, j->log_path);
    if (rc != 0) {
        tc_error_set(TC_ERR_COMPILE, "CPU compile of %s: cannot run the compiler '%s': %s", what,
                     argv[0], strerror(rc));
        job_clear(j);
        return TC_ERR_COMPILE;
    }
    double limit = cc_timeout();
    j->deadline = limit > 0 ? tc_time_now() + limit : 0;
    compile_count++;
    return TC_OK;
}

/* seals the output and renames it to so_path (an empty directory there is
 * removed first). When a full directory holds the name and own is not NULL,
 * *own takes the sealed output instead. */
TC_MUST_USE static tc_status publish(cc_job *j, char **own) {
    tc_status st = tc_cache_seal_file(j->tmp_so, j->key);
    if (st != TC_OK) return st;
    struct stat sb;
    if (lstat(j->so_path, &sb) == 0 && S_ISDIR(sb.st_mode)) rmdir(j->so_path);
    if (rename(j->tmp_so, j->so_path) == 0) return TC_OK;
    int err = errno;
    if (own && (err == EISDIR || err == ENOTEMPTY || err == EEXIST)) {
        *own = j->tmp_so;
        j->tmp_so = NULL;
        return TC_OK;
    }
    return tc_error_set(TC_ERR_IO, "CPU compile: cannot rename '%s' to '%s': %s", j->tmp_so,
                        j->so_path, strerror(err));
}

/* waits for the compiler; when it succeeded, publishes its output (own: as
 * publish). A failure is TC_ERR_COMPILE quoting the log. Clears the job. */
TC_MUST_USE static tc_status job_finish(cc_job *j, char **own) {
    int status = 0;
    bool killed = false;
    tc_status st = TC_OK;
    if (wait_job(j, &status, &killed) < 0) {
        if (errno != ECHILD) /* ECHILD: the host reaps children: the output decides */
            st = tc_error_set(TC_ERR_COMPILE, "CPU compile of %s: waitpid: %s", j->what,
                              strerror(errno));
        status = 0;
    }
    char log[LOG_MAX + 16];
    if (st == TC_OK && killed)
        st = tc_error_set(TC_ERR_COMPILE, "CPU compile of %s: %s ran past TC_CC_TIMEOUT (%g s) and "
                          "was killed", j->what, j->argv0, cc_timeout());
    if (st == TC_OK && !(WIFEXITED(status) && WEXITSTATUS(status) == 0)) {
        read_log(j->log_path, log);
        st = tc_error_set(TC_ERR_COMPILE, "CPU compile of %s failed (%s %s %d):\n%s", j->what,
                          j->argv0, WIFEXITED(status) ? "exited with status" : "killed by signal",
                          WIFEXITED(status) ? WEXITSTATUS(status) : WTERMSIG(status), log);
    }
    if (st == TC_OK && access(j->tmp_so, F_OK) != 0) {
        read_log(j->log_path, log);
        st = tc_error_set(TC_ERR_COMPILE, "CPU compile of %s: the compiler wrote no output:\n%s",
                          j->what, log[0] ? log : "(and printed nothing)");
    }
    if (st == TC_OK) st = publish(j, own);
    job_clear(j);
    return st;
}

TC_MUST_USE tc_status tc_cpu_cc_build(const char *dir, const char *key, const char *src, const char *fn_name,
                          char **own) {
    *own = NULL;
    char *what = fmt_alloc("'%s'", fn_name);
    if (!what) return TC_ERR_MEMORY;
    cc_job j;
    tc_status st = job_start(&j, dir, key, src, what);
    tc_free(what);
    if (st == TC_OK) st = job_finish(&j, own);
    if (st == TC_OK) build_count++;
    return st;
}

/* ---- batch members' entries ------------------------------------------------ */

/* publishes <dir>/<key>.ref, sealed: key's kernel is sym in <dir>/<bkey>.so.
 * A failure only costs a later compile of that kernel alone. */
TC_MUST_USE static tc_status write_ref(const char *dir, const char *key, const char *bkey, const char *sym) {
    tc_error_state es;
    tc_error_save(&es);
    char *text = fmt_alloc("tinyc-batch %s %s\n", bkey, sym);
    char *ref = text ? tc_cpu_cc_path(dir, key, ".ref") : NULL;
    char *tmp = ref ? write_temp(dir, key, ".tmp", text) : NULL;
    tc_status st = TC_OK;
    if (!ref) st = TC_ERR_MEMORY;
    else if (!tmp) st = tc_error_code() == TC_ERR_MEMORY ? TC_ERR_MEMORY : TC_OK;
    else if (tc_cache_seal_file(tmp, key) != TC_OK || rename(tmp, ref) != 0) unlink(tmp);
    tc_free(text), tc_free(ref), tc_free(tmp);
    if (st == TC_OK) tc_error_restore(&es);
    return st;
}

/* the batch key in <dir>/<key>.ref when that verifies and names sym, into
 * bkey (*found); a ref that does not is removed */
TC_MUST_USE static tc_status read_ref(const char *dir, const char *key, const char *sym, char bkey[33],
                          bool *found) {
    *found = false;
    char *ref = tc_cpu_cc_path(dir, key, ".ref"), *text = NULL;
    if (!ref) return TC_ERR_MEMORY;
    size_t n = 0;
    tc_cache_entry e;
    tc_status st = tc_cache_read(ref, key, &text, &n, &e);
    const char *tag = "tinyc-batch ";
    size_t t = strlen(tag), ls = strlen(sym);
    bool ok = text && n == t + 32 + 1 + ls + 1 && memcmp(text, tag, t) == 0 &&
              text[t + 32] == ' ' && memcmp(text + t + 33, sym, ls) == 0 && text[n - 1] == '\n';
    for (size_t i = 0; ok && i < 32; i++) {
        char c = text[t + i];
        ok = (c >= '0' && c <= '9') || (c >= 'a' && c <= 'f');
        bkey[i] = c;
    }
    bkey[32] = '\0';
    if (st == TC_OK && e.is_there && !ok) tc_cache_remove(ref, &e.id);
    *found = ok;
    tc_free(ref), tc_free(text);
    return st;
}

void tc_cpu_checked_free(tc_cpu_checked *c) {
    tc_free(c->ids);
    *c = (tc_cpu_checked){0};
}

/* whether the file at path is key's whole entry: the version there now was
 * checked before (seen), or is checked now (and remembered in seen); what
 * does not verify is removed */
TC_MUST_USE static tc_status check_entry(const char *path, const char *key, tc_cpu_checked *seen,
                             bool *is_whole) {
    tc_file_id id;
    *is_whole = false;
    if (tc_file_id_get(path, &id))
        for (int i = 0; i < seen->n && !*is_whole; i++)
            *is_whole = tc_file_id_equal(&seen->ids[i], &id);
    if (*is_whole) return TC_OK;
    tc_cache_entry e;
    tc_cache_check(path, key, &e);
    if (e.is_there && !e.is_whole) tc_cache_remove(path, &e.id);
    if (!e.is_whole) return TC_OK;
    if (seen->n == seen->cap) {
        int cap = seen->cap ? 2 * seen->cap : 8;
        tc_file_id *ids = tc_realloc(seen->ids, (size_t)cap * sizeof *ids);
        if (!ids) return TC_ERR_MEMORY;
        seen->ids = ids, seen->cap = cap;
    }
    seen->ids[seen->n++] = e.id;
    *is_whole = true;
    return TC_OK;
}

TC_MUST_USE tc_status tc_cpu_cc_find(const char *dir, const char *key, const char *fn_name,
                         tc_cpu_checked *seen, char **so_path, char **sym) {
    *so_path = *sym = NULL;
    char *so = tc_cpu_cc_path(dir, key, ".so");
    if (!so) return TC_ERR_MEMORY;
    bool is_whole;
    tc_status st = check_entry(so, key, seen, &is_whole);
    if (st == TC_OK && is_whole) {
        *sym = tc_strdup(fn_name);
        if (!*sym) tc_free(so);
        *so_path = *sym ? so : NULL;
        return *sym ? TC_OK : TC_ERR_MEMORY;
    }
    tc_free(so);
    if (st != TC_OK) return st;
    char *bsym = tc_cpu_batch_symbol(fn_name, key), bkey[33];
    if (!bsym) return TC_ERR_MEMORY;
    bool found;
    st = read_ref(dir, key, bsym, bkey, &found);
    char *bso = st == TC_OK && found ? tc_cpu_cc_path(dir, bkey, ".so") : NULL;
    if (found && !bso) st = TC_ERR_MEMORY;
    is_whole = false;
    if (bso) st = check_entry(bso, bkey, seen, &is_whole);
    if (st == TC_OK && is_whole) {
        *so_path = bso, *sym = bsym;
        return TC_OK;
    }
    tc_free(bso), tc_free(bsym);
    return st;
}

/* ---- building many ------------------------------------------------------------ */

/* a compiler run of build_all: one kernel alone, or a batch */
typedef struct {
    int first;     /* its kernels: order[first .. first + n) */
    int n;         /* how many (1: compiled alone, as tc_cpu_cc_build would) */
    size_t weight; /* bytes of their sources, for the order of the runs */
} task;

/* the tasks and the runs of build_all */
typedef struct {
    const char *dir;          /* the cache directory */
    const tc_cpu_kernel *ks;  /* the kernels */
    int *order;               /* kernel indices, grouped by task (2n: fallbacks too) */
    int n_order;              /* used */
    task *tasks;              /* 3n at most: batches, kernels alone, fallbacks */
    int n_tasks;              /* planned so far */
    cc_job jobs[MAX_JOBS];    /* running: jobs[(head + i) % max_jobs], i < n_running */
    int job_task[MAX_JOBS];   /* the task of each job */
    char bkeys[MAX_JOBS][33]; /* the batch key of each batch job */
    int head, n_running, max_jobs;
} builder;

static void add_task(builder *b, const int *kernels, int n) {
    task *t = &b->tasks[b->n_tasks++];
    *t = (task){.first = b->n_order, .n = n};
    for (int i = 0; i < n; i++) {
        b->order[b->n_order++] = kernels[i];
        t->weight += strlen(b->ks[kernels[i]].src);
    }
}

/* the kernels that may join split into bins of about equal source bytes
 * (longest first into the lightest bin), one bin per compiler at once, but
 * an n-th bin only where it saves at least the CPU time its compiler's
 * start costs: n bins take W/n of wall time for a batch that compiles in W
 * alone, the n-th saves W/(n(n-1)), so it needs n(n-1) starts' worth of
 * kernel source (CC_START_BYTES each: 16 KB for two compilers; the
 * differential suite's one- and two-kernel realizes then run one compiler,
 * 743 -> 611 runs, 104 -> 85 s of CPU in the same wall time); the rest
 * alone. Tasks sorted heaviest first. */
TC_MUST_USE static tc_status plan(builder *b, int n) {
    int *join = tc_malloc(2 * (size_t)n * sizeof *join), n_join = 0;
    if (!join) return TC_ERR_MEMORY;
    int *bin = join + n;
    size_t kernel_bytes = 0;
    for (int i = 0; i < n; i++) {
        size_t bytes = tc_cpu_batch_kernel_bytes(b->ks[i].src, b->ks[i].fn_name);
        if (bytes) join[n_join++] = i, kernel_bytes += bytes;
        else add_task(b, &i, 1);
    }
    for (int i = 1; i < n_join; i++) /* by source length, longest first (insertion) */
        for (int k = i; k > 0 && strlen(b->ks[join[k]].src) > strlen(b->ks[join[k - 1]].src); k--) {
            int t = join[k];
            join[k] = join[k - 1], join[k - 1] = t;
        }
    int most = n_join < b->max_jobs ? n_join : b->max_jobs, n_bins = n_join > 0;
    while (n_bins < most && (size_t)(n_bins + 1) * (size_t)n_bins * CC_START_BYTES <= kernel_bytes) n_bins++;
    size_t load[MAX_JOBS] = {0};
    for (int i = 0; i < n_join; i++) {
        int best = 0;
        for (int k = 1; k < n_bins; k++) best = load[k] < load[best] ? k : best;
        bin[i] = best;
        load[best] += strlen(b->ks[join[i]].src);
    }
    for (int k = 0; k < n_bins; k++) {
        int first = b->n_order;
        for (int i = 0; i < n_join; i++)
            if (bin[i] == k) b->order[b->n_order++] = join[i];
        b->tasks[b->n_tasks++] = (task){.first = first, .n = b->n_order - first, .weight = load[k]};
    }
    tc_free(join);
    for (int i = 1; i < b->n_tasks; i++) /* heaviest first: they finish last */
        for (int k = i; k > 0 && b->tasks[k].weight > b->tasks[k - 1].weight; k--) {
            task t = b->tasks[k];
            b->tasks[k] = b->tasks[k - 1], b->tasks[k - 1] = t;
        }
    return TC_OK;
}

/* starts task t's compiler; only TC_ERR_MEMORY is an error (a kernel that
 * does not start is left for tc_cpu_cc_build to report) */
TC_MUST_USE static tc_status task_start(builder *b, int t) {
    const task *tk = &b->tasks[t];
    int slot = (b->head + b->n_running) % b->max_jobs;
    const tc_cpu_kernel *k = &b->ks[b->order[tk->first]];
    tc_error_state es;
    tc_error_save(&es);
    char *text = NULL, *what;
    if (tk->n == 1) {
        what = fmt_alloc("'%s'", k->fn_name);
    } else {
        text = tc_cpu_batch_text(b->ks, b->order + tk->first, tk->n);
        if (text && tc_cpu_cc_key(text, b->bkeys[slot]) != TC_OK) tc_free(text), text = NULL;
        what = text ? fmt_alloc("a batch of %d kernels ('%s', ...)", tk->n, k->fn_name) : NULL;
    }
    tc_status st = what ? job_start(&b->jobs[slot], b->dir, tk->n == 1 ? k->key : b->bkeys[slot],
                                    tk->n == 1 ? k->src : text, what)
                        : tc_error_code();
    tc_free(text), tc_free(what);
    if (st == TC_OK) {
        b->job_task[slot] = t;
        b->n_running++;
        return TC_OK;
    }
    if (st == TC_ERR_MEMORY) return st;
    tc_error_restore(&es);
    return TC_OK;
}

/* waits for the oldest run: a batch that built publishes its kernels'
 * entries, one that failed becomes one task per kernel */
TC_MUST_USE static tc_status task_finish(builder *b) {
    int slot = b->head, t = b->job_task[slot];
    b->head = (b->head + 1) % b->max_jobs;
    b->n_running--;
    tc_error_state es;
    tc_error_save(&es);
    tc_status st = job_finish(&b->jobs[slot], NULL);
    const task tk = b->tasks[t];
    if (st != TC_OK) {
        tc_error_restore(&es);
        for (int i = 0; i < tk.n && tk.n > 1; i++) add_task(b, &b->order[tk.first + i], 1);
        return TC_OK;
    }
    build_count += tk.n;
    for (int i = 0; i < tk.n && tk.n > 1 && st == TC_OK; i++) {
        const tc_cpu_kernel *k = &b->ks[b->order[tk.first + i]];
        char *sym = tc_cpu_batch_symbol(k->fn_name, k->key);
        st = sym ? write_ref(b->dir, k->key, b->bkeys[slot], sym) : TC_ERR_MEMORY;
        tc_free(sym);
    }
    return st;
}

/* compilers run at once: TC_CC_JOBS, else the cores; 1 to MAX_JOBS */
static int cc_jobs(void) {
    const char *e = getenv("TC_CC_JOBS");
    long n = e && *e ? strtol(e, NULL, 10) : sysconf(_SC_NPROCESSORS_ONLN);
    return n < 1 ? 1 : n > MAX_JOBS ? MAX_JOBS : (int)n;
}

TC_MUST_USE tc_status tc_cpu_cc_build_all(const char *dir, const tc_cpu_kernel *ks, int n) {
    if (n <= 0) return TC_OK;
    tc_error_state es;
    tc_error_save(&es);
    builder *b = tc_calloc(1, sizeof *b);
    if (b) {
        b->order = tc_malloc(2 * (size_t)n * sizeof *b->order);
        b->tasks = tc_malloc(3 * (size_t)n * sizeof *b->tasks);
    }
    tc_status st = b && b->order && b->tasks ? TC_OK : TC_ERR_MEMORY;
    if (st == TC_OK) {
        b->dir = dir, b->ks = ks;
        b->max_jobs = cc_jobs();
        st = plan(b, n);
    }
    for (int next = 0; st == TC_OK && (next < b->n_tasks || b->n_running > 0);) {
        if (next < b->n_tasks && b->n_running < b->max_jobs) st = task_start(b, next++);
        else st = task_finish(b);
    }
    while (b && b->n_running > 0) { /* after an error: wait, clean up; st says what failed */
        tc_status late = task_finish(b);
        (void)late;
    }
    if (b) tc_free(b->order), tc_free(b->tasks);
    tc_free(b);
    if (st != TC_OK)
        return tc_error_set(TC_ERR_MEMORY, "CPU compile: out of memory building kernels");
    tc_error_restore(&es);
    return TC_OK;
}
