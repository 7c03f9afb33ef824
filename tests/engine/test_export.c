/* test_export.c - tc_export_c end to end: graphs are exported, the files are
 * built with the system compiler into programs that link nothing of ours
 * (only libc and libm; the build directory holds no libtinyc header or
 * library), run on the same inputs as the library, and compared with it:
 *  - bit for bit when built with the CPU runtime's own compiler flags (the
 *    kernels are the library's, verbatim), also through the thread hook;
 *  - within the differential suite's tolerances when built with clang, and
 *    in plain C99 (-DTC_EXPORT_PLAIN, -std=c99 -pedantic), each with
 *    -Wall -Wextra -Werror;
 *  - under AddressSanitizer and UBSan (the generated code's own accesses).
 * Graphs: cases of the differential suite (tests/diff: every family; their
 * realized leaves become inputs, fed permuted data so the arguments are
 * known to be read at run time), the MNIST convnet's forward (two batches)
 * and its Adam training step run 10 times (standalone state vs 10 library
 * steps: the loss of each step, then every parameter and state tensor), an
 * embedding's SGD step run 5 times (gathers forward, scatter kernels in the
 * backward). Also: the bad calls (messages), the header's contract, reset.
 */
#include "../diff/diff_gen.h"
#include "../diff/diff_case.h"
#include "../../examples/convnet.h"

#include <ctype.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

enum { MAX_CASES = 48, MAX_IO = 64, DIFF_PER_FAMILY = 5, TRAIN_STEPS = 10, MNIST_B = 4 };

/* the CPU runtime's flags (src/runtime/cpu.c, minus -fPIC -shared) */
#define LIB_FLAGS                                                          \
    "-O2 -march=native -fno-predictive-commoning -fno-math-errno -fwrapv " \
    "-fexcess-precision=standard -std=gnu11"

/* one exported graph and what the library computed for it, per step */
typedef struct {
    char name[32];            /* export name */
    int n_in, n_out;          /* arguments */
    size_t in_bytes;          /* one step's inputs, all of them */
    unsigned char *in;        /* steps blocks of in_bytes (owned) */
    size_t out_bytes[MAX_IO]; /* each output */
    tc_dtype out_dt[MAX_IO];  /* its dtype */
    double rtol[MAX_IO];      /* across compilers */
    double atol[MAX_IO];
    size_t step_bytes;   /* one step's outputs */
    unsigned char *want; /* the library's: steps blocks of step_bytes (owned) */
    int steps;           /* runs */
    int tight_steps;     /* across compilers: steps compared whole; later ones up to
                                  loss_steps compare output 0 (a loss) alone, within loss_rtol */
    int loss_steps;
    double loss_rtol;
} xcase;

typedef struct {
    char dir[256];      /* the build directory */
    xcase c[MAX_CASES]; /* cases */
    int n;              /* used */
} suite;

/* ---- files and commands ------------------------------------------------------ */

static void make_dir(char *dir, size_t cap) {
    const char *base = getenv("TMPDIR");
    snprintf(dir, cap, "%s/tc_export_XXXXXX", base && *base ? base : "/tmp");
    assert_non_null(mkdtemp(dir));
}

static void remove_dir(const char *dir) {
    char cmd[512];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", dir);
    assert_int_equal(system(cmd), 0);
}

static void put_file(const char *dir, const char *name, const void *data, size_t n) {
    char path[512];
    snprintf(path, sizeof path, "%s/%s", dir, name);
    FILE *f = fopen(path, "wb");
    assert_non_null(f);
    assert_true(n == 0 || fwrite(data, 1, n, f) == n);
    assert_int_equal(fclose(f), 0);
}

/* the file's bytes (malloc'ed, *n its size, a NUL after them), NULL when absent */
static unsigned char *get_file(const char *dir, const char *name, size_t *n) {
    char path[512];
    snprintf(path, sizeof path, "%s/%s", dir, name);
    FILE *f = fopen(path, "rb");
    if (!f) return NULL;
    fseek(f, 0, SEEK_END);
    long len = ftell(f);
    fseek(f, 0, SEEK_SET);
    unsigned char *p = malloc((size_t)len + 1);
    assert_non_null(p);
    *n = fread(p, 1, (size_t)len, f);
    p[*n] = '\0'; /* text files are read as strings */
    fclose(f);
    return p;
}

/* runs a shell command in dir; on failure prints its log */
static int sh(const char *dir, const char *cmd, const char *log) {
    char line[4096];
    snprintf(line, sizeof line, "cd '%s' && %s > %s 2>&1", dir, cmd, log);
    int rc = system(line);
    if (rc != 0) {
        size_t n = 0;
        unsigned char *text = get_file(dir, log, &n);
        fprintf(stderr, "command failed (%d): %s\n%.*s\n", rc, cmd, (int)(n < 6000 ? n : 6000),
                text ? (const char *)text : "");
        free(text);
    }
    return rc;
}

/* ---- the driver: one program running every case of the suite --------------- */

/* main.c: the entry type, the table of cases (written per suite), then
 * the code that runs each case's steps: inputs from <name>.in, outputs to
 * <name>.out, with the thread hook set to a three-way split when asked */
static const char driver_types[] = "typedef void (*task_fn)(void *, int64_t, int64_t);\n"
                                   "typedef void (*pfor_fn)(task_fn, void *, int64_t);\n"
                                   "typedef struct {\n  const char *name;\n"
                                   "  int (*run)(void *, const void *const *, void *const *);\n"
                                   "  pfor_fn *hook;\n  size_t arena;\n  int n_in, n_out, steps;\n"
                                   "  size_t in_bytes[64], out_bytes[64];\n} entry;\n";
static const char driver_code[] =
    "/* task over [0, n) in three parts, the last first: any split gives the same results */\n"
    "static void split3(task_fn task, void *ctx, int64_t n) {\n"
    "  for (int k = 2; k >= 0; k--) task(ctx, n * k / 3, n * (k + 1) / 3);\n}\n"
    "static int run_entry(const entry *e, int split) {\n"
    "  int steps = e->steps;\n  char path[256];\n  size_t in_step = 0, out_step = 0;\n"
    "  for (int i = 0; i < e->n_in; i++) in_step += e->in_bytes[i];\n"
    "  for (int i = 0; i < e->n_out; i++) out_step += e->out_bytes[i];\n"
    "  unsigned char *in = malloc(in_step * (size_t)steps + 1);\n"
    "  unsigned char *out = malloc(out_step * (size_t)steps + 1);\n"
    "  void *arena = e->arena ? malloc(e->arena) : NULL;\n"
    "  if (!in || !out || (e->arena && !arena)) return 1;\n"
    "  snprintf(path, sizeof path, \"%s.in\", e->name);\n"
    "  FILE *f = fopen(path, \"rb\");\n"
    "  if (!f || fread(in, 1, in_step * (size_t)steps, f) != in_step * (size_t)steps) return 2;\n"
    "  fclose(f);\n"
    "  *e->hook = split ? split3 : NULL;\n"
    "  void *own[64];\n"
    "  for (int i = 0; i < e->n_in; i++)\n"
    "    if (!(own[i] = malloc(e->in_bytes[i] + 1))) return 1;\n"
    "  for (int s = 0; s < steps; s++) {\n"
    "    const void *ins[64];\n    void *outs[64];\n"
    "    size_t at = in_step * (size_t)s, ot = out_step * (size_t)s;\n"
    "    for (int i = 0; i < e->n_in; i++) /* each in a block of its own: aligned */\n"
    "      memcpy(own[i], in + at, e->in_bytes[i]), ins[i] = own[i], at += e->in_bytes[i];\n"
    "    for (int i = 0; i < e->n_out; i++) outs[i] = out + ot, ot += e->out_bytes[i];\n"
    "    int rc = e->run(arena, ins, outs);\n"
    "    if (rc != 0) {\n      fprintf(stderr, \"%s_run returned %d\\n\", e->name, rc);\n"
    "      return 3;\n    }\n  }\n"
    "  snprintf(path, sizeof path, \"%s.out\", e->name);\n"
    "  f = fopen(path, \"wb\");\n"
    "  if (!f || fwrite(out, 1, out_step * (size_t)steps, f) != out_step * (size_t)steps) return "
    "4;\n"
    "  fclose(f);\n  for (int i = 0; i < e->n_in; i++) free(own[i]);\n"
    "  free(in);\n  free(out);\n  free(arena);\n  return 0;\n}\n"
    "int main(int argc, char **argv) {\n"
    "  int split = argc > 1;\n  (void)argv;\n"
    "  for (size_t i = 0; i < sizeof entries / sizeof entries[0]; i++)\n"
    "    if (run_entry(&entries[i], split)) return 1;\n"
    "  return 0;\n}\n";

static void write_main(const suite *s) {
    tc_strbuf b = {0};
    tc_sb_printf(&b, "#include <stdint.h>\n#include <stdio.h>\n#include <stdlib.h>\n"
                     "#include <string.h>\n");
    for (int i = 0; i < s->n; i++) tc_sb_printf(&b, "#include \"%s.h\"\n", s->c[i].name);
    tc_sb_printf(&b, "%sstatic const entry entries[] = {\n", driver_types);
    for (int i = 0; i < s->n; i++) {
        const xcase *c = &s->c[i];
        char u[32] = {0};
        for (int k = 0; c->name[k]; k++) u[k] = (char)toupper((unsigned char)c->name[k]);
        tc_sb_printf(&b,
                     "  {\"%s\", %s_run, &%s_parallel_for, %s_ARENA_BYTES, %s_N_INPUTS, "
                     "%s_N_OUTPUTS, %d, {",
                     c->name, c->name, c->name, u, u, u, c->steps);
        for (int k = 0; k < c->n_in; k++)
            tc_sb_printf(&b, "%s%s_INPUT%d_BYTES", k ? ", " : "", u, k);
        tc_sb_printf(&b, "%s}, {", c->n_in ? "" : "0");
        for (int k = 0; k < c->n_out; k++)
            tc_sb_printf(&b, "%s%s_OUTPUT%d_BYTES", k ? ", " : "", u, k);
        tc_sb_printf(&b, "}},\n");
    }
    tc_sb_printf(&b, "};\n%s", driver_code);
    assert_false(b.failed);
    put_file(s->dir, "main.c", b.s, b.len);
    tc_sb_free(&b);
}

/* builds prog from main.c and every case's file with cc and flags, linking
 * libm alone */
static int build(const suite *s, const char *cc, const char *flags, const char *prog) {
    tc_strbuf b = {0};
    tc_sb_printf(&b, "%s %s -o %s main.c", cc, flags, prog);
    for (int i = 0; i < s->n; i++) tc_sb_printf(&b, " %s.c", s->c[i].name);
    tc_sb_printf(&b, " -lm");
    assert_false(b.failed);
    char log[64];
    snprintf(log, sizeof log, "%s.log", prog);
    struct timespec t0, t1;
    clock_gettime(CLOCK_MONOTONIC, &t0);
    int rc = sh(s->dir, b.s, log);
    clock_gettime(CLOCK_MONOTONIC, &t1);
    fprintf(stderr, "  built %s with %s in %.1f s\n", prog, cc,
            (double)(t1.tv_sec - t0.tv_sec) + 1e-9 * (double)(t1.tv_nsec - t0.tv_nsec));
    tc_sb_free(&b);
    return rc;
}

/* n bytes of p in a block of their own (malloc'ed): outputs lie packed in a
 * step's block, so an output after an odd-length float16 one is not aligned */
static void *aligned_copy(const void *p, size_t n) {
    void *q = malloc(n + 8);
    assert_non_null(q);
    memcpy(q, p, n);
    return q;
}

/* tc_allclose of n elements of dt at got and want, which may be unaligned */
static bool close_at(const void *got, const void *want, tc_dtype dt, int64_t n, double rtol,
                     double atol, const char *what) {
    size_t bytes = (size_t)n * tc_dtype_size(dt);
    void *g = aligned_copy(got, bytes), *w = aligned_copy(want, bytes);
    bool ok = tc_allclose(g, w, dt, n, rtol, atol, what);
    free(g), free(w);
    return ok;
}

/* runs prog (every case, its steps) and compares each case's outputs with
 * the library's: byte for byte when exact, else within the case's tolerance */
static int run_and_compare(const suite *s, const char *prog, bool split, bool exact) {
    char cmd[256];
    int bad = 0;
    snprintf(cmd, sizeof cmd, "./%s%s", prog, split ? " split" : "");
    if (sh(s->dir, cmd, "run.log") != 0) return 1;
    for (int i = 0; i < s->n; i++) {
        const xcase *c = &s->c[i];
        char name[64];
        size_t n = 0;
        snprintf(name, sizeof name, "%s.out", c->name);
        unsigned char *got = get_file(s->dir, name, &n);
        assert_non_null(got);
        assert_int_equal(n, c->step_bytes * (size_t)c->steps);
        size_t at = 0;
        for (int st = 0; st < c->steps; st++)
            for (int k = 0; k < c->n_out; k++) {
                size_t es = tc_dtype_size(c->out_dt[k]);
                char what[96];
                snprintf(what, sizeof what, "%s (%s) step %d output %d", c->name, prog, st, k);
                bool loose = !exact && st >= c->tight_steps;
                bool ok = exact   ? memcmp(got + at, c->want + at, c->out_bytes[k]) == 0
                          : loose ? k > 0 || st >= c->loss_steps ||
                                        close_at(got + at, c->want + at, c->out_dt[k], 1,
                                                    c->loss_rtol, 0, what)
                                  : close_at(got + at, c->want + at, c->out_dt[k],
                                                (int64_t)(c->out_bytes[k] / es), c->rtol[k],
                                                c->atol[k], what);
                if (!ok && exact) {
                    fprintf(stderr, "%s: not bit-identical to the library\n", what);
                    close_at(got + at, c->want + at, c->out_dt[k],
                                (int64_t)(c->out_bytes[k] / es), 0, 0, what);
                }
                bad += !ok;
                at += c->out_bytes[k];
            }
        if (!exact && c->tight_steps < c->steps) { /* how far the losses drift apart */
            fprintf(stderr, "  %s (%s): loss per step, relative difference:", c->name, prog);
            for (int st = 0; st < c->steps; st++) {
                float g0, w0;
                memcpy(&g0, got + (size_t)st * c->step_bytes, 4);
                memcpy(&w0, c->want + (size_t)st * c->step_bytes, 4);
                fprintf(stderr, " %.1e", fabs((double)g0 - w0) / fabs((double)w0));
            }
            fprintf(stderr, "\n");
        }
        free(got);
    }
    return bad;
}

/* the builds of the suite: the library's flags (bit for bit, serial and
 * through the hook), clang, plain C99 with gcc; is_all: also ASan+UBSan and
 * plain C99 with clang */
static void check_builds(const suite *s, bool is_all) {
    write_main(s);
    assert_int_equal(build(s, "cc", LIB_FLAGS " -Wall -Wextra -Werror", "same"), 0);
    assert_int_equal(run_and_compare(s, "same", false, true), 0);
    assert_int_equal(run_and_compare(s, "same", true, true), 0);
    if (is_all) {
        assert_int_equal(build(s, "cc",
                               "-std=c11 -O1 -g -fsanitize=address,undefined "
                               "-fno-sanitize-recover=all -fwrapv",
                               "asan"),
                         0);
        assert_int_equal(run_and_compare(s, "asan", true, false), 0);
    }
    if (system("clang --version > /dev/null 2>&1") == 0) {
        assert_int_equal(build(s, "clang", "-std=c11 -O2 -fwrapv -Wall -Wextra -Werror", "clang"),
                         0);
        assert_int_equal(run_and_compare(s, "clang", false, false), 0);
        if (is_all)
            assert_int_equal(build(s, "clang",
                                   "-std=c99 -O2 -fwrapv -DTC_EXPORT_PLAIN -Wall "
                                   "-Wextra -Werror -pedantic",
                                   "plainclang"),
                             0);
    } else {
        fprintf(stderr, "  (no clang here: its builds are skipped)\n");
    }
    assert_int_equal(build(s, "cc",
                           "-std=c99 -O2 -fwrapv -DTC_EXPORT_PLAIN -Wall -Wextra "
                           "-Werror -pedantic",
                           "plain"),
                     0);
    assert_int_equal(run_and_compare(s, "plain", false, false), 0);
}

static void suite_free(suite *s) {
    for (int i = 0; i < s->n; i++) free(s->c[i].in), free(s->c[i].want);
    remove_dir(s->dir);
}

/* ---- recording a case --------------------------------------------------------- */

/* a new case named name with outputs outs (their dtypes and sizes) and the
 * inputs ins, which tc_export_c writes into the suite's directory */
static xcase *add_case(suite *s, const char *name, tc_tensor **outs, int n_out, tc_tensor **ins,
                       int n_in, int steps) {
    assert_true(s->n < MAX_CASES && n_out <= MAX_IO && n_in <= MAX_IO);
    xcase *c = &s->c[s->n++];
    memset(c, 0, sizeof *c);
    snprintf(c->name, sizeof c->name, "%s", name);
    c->n_in = n_in, c->n_out = n_out, c->steps = c->tight_steps = steps;
    for (int k = 0; k < n_out; k++) {
        c->out_dt[k] = tc_get_dtype(outs[k]);
        c->out_bytes[k] = (size_t)tc_numel(outs[k]) * tc_dtype_size(c->out_dt[k]);
        c->step_bytes += c->out_bytes[k];
        c->rtol[k] = 1e-5, c->atol[k] = 1e-6;
    }
    for (int k = 0; k < n_in; k++)
        c->in_bytes += (size_t)tc_numel(ins[k]) * tc_dtype_size(tc_get_dtype(ins[k]));
    c->in = calloc((size_t)steps * c->in_bytes + 1, 1);
    c->want = calloc((size_t)steps * c->step_bytes + 1, 1);
    assert_true(c->in && c->want);
    if (tc_export_c(s->dir, name, outs, n_out, ins, n_in) != TC_OK)
        fail_msg("tc_export_c(%s): %s", name, tc_last_error());
    return c;
}

/* step st's inputs of c: the tensors' current elements */
static void record_inputs(xcase *c, int st, tc_tensor **ins) {
    unsigned char *p = c->in + (size_t)st * c->in_bytes;
    for (int k = 0; k < c->n_in; k++) {
        size_t n = (size_t)tc_numel(ins[k]) * tc_dtype_size(tc_get_dtype(ins[k]));
        assert_int_equal(tc_to_host(ins[k], p, n), TC_OK);
        p += n;
    }
}

/* step st's outputs of c as the library computes them (realizes outs) */
static void record_outputs(xcase *c, int st, tc_tensor **outs) {
    if (tc_realize(outs, c->n_out) != TC_OK) fail_msg("tc_realize: %s", tc_last_error());
    unsigned char *p = c->want + (size_t)st * c->step_bytes;
    for (int k = 0; k < c->n_out; k++) {
        assert_int_equal(tc_to_host(outs[k], p, c->out_bytes[k]), TC_OK);
        p += c->out_bytes[k];
    }
}

static void finish_case(const suite *s, const xcase *c) {
    char name[64];
    snprintf(name, sizeof name, "%s.in", c->name);
    put_file(s->dir, name, c->in, (size_t)c->steps * c->in_bytes);
}

/* ---- cases of the differential suite --------------------------------------------- */

static uint64_t mix(uint64_t *x) {
    uint64_t z = (*x += 0x9E3779B97F4A7C15ULL);
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ULL;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBULL;
    return z ^ (z >> 31);
}

/* shuffles t's elements in its own buffer (tc_assign): new data, the same
 * values, so every fact the generator knows of the case still holds */
static void permute_in_place(tc_tensor *t, uint64_t seed) {
    tc_dtype dt = tc_get_dtype(t);
    size_t es = tc_dtype_size(dt), n = (size_t)tc_numel(t);
    if (n < 2) return;
    unsigned char *p = malloc(n * es), tmp[8];
    assert_non_null(p);
    assert_int_equal(tc_to_host(t, p, n * es), TC_OK);
    for (size_t i = n - 1; i > 0; i--) {
        size_t j = (size_t)(mix(&seed) % (i + 1));
        memcpy(tmp, p + i * es, es), memcpy(p + i * es, p + j * es, es),
            memcpy(p + j * es, tmp, es);
    }
    tc_tensor *v = tc_from_data(p, dt, tc_ndim(t), tc_shape(t), NULL);
    assert_non_null(v);
    assert_int_equal(tc_assign(t, v), TC_OK);
    assert_int_equal(tc_realize(&t, 1), TC_OK);
    tc_release(v);
    free(p);
}

/* case i of family fam as the differential suite builds it (its seed): the
 * sinks exported with the realized leaves as inputs, which then get
 * permuted data before the library computes the sinks */
static void add_diff_case(suite *s, family fam, int i) {
    uint64_t seed = (uint64_t)fam * 100003u + (uint64_t)i * 7919u + 17u;
    int64_t noopt = tc_get_flag("TC_NOOPT"), nofuse = tc_get_flag("TC_NOFUSE");
    if (fam == FAM_MIXED) { /* the suite's unoptimised and unfused cases */
        tc_set_flag("TC_NOOPT", noopt > 0 || i % 3 == 1);
        tc_set_flag("TC_NOFUSE", nofuse > 0 || i % 3 == 2);
    }
    gen *g = gen_new(fam, seed);
    assert_non_null(g);
    int targets[TARGETS_MAX], nt = build_case(g, targets);
    if (g->failed)
        fail_msg("diff %s seed %llu failed to build:\n%s", fam_names[fam], (unsigned long long)seed,
                 g->log);
    tc_tensor *outs[TARGETS_MAX], *ins[POOL_MAX];
    int n_in = 0;
    for (int v = 0; v < g->n; v++) {
        const tc_node *nd = tc_tensor_node(g->pool[v].t);
        bool dup = false;
        for (int k = 0; k < n_in; k++) dup |= tc_tensor_node(ins[k])->buffer == nd->buffer;
        if (g->pool[v].is_leaf && nd->op == TC_OP_BUFFER && !dup) ins[n_in++] = g->pool[v].t;
    }
    for (int k = 0; k < nt; k++) outs[k] = g->pool[targets[k]].t;
    if (nt > 0) {
        char name[32];
        snprintf(name, sizeof name, "d%d_%d", (int)fam, i);
        xcase *c = add_case(s, name, outs, nt, ins, n_in, 1);
        for (int k = 0; k < n_in; k++) permute_in_place(ins[k], seed + (uint64_t)k);
        record_inputs(c, 0, ins);
        record_outputs(c, 0, outs);
        size_t at = 0;
        for (int k = 0; k < nt; at += c->out_bytes[k++]) { /* each build may differ from the
                                                              oracle this much */
            if (!is_float(c->out_dt[k])) {
                c->rtol[k] = c->atol[k] = 0;
                continue;
            }
            int64_t n = (int64_t)(c->out_bytes[k] / tc_dtype_size(c->out_dt[k]));
            void *want = aligned_copy(c->want + at, c->out_bytes[k]);
            tolerance(&g->pool[targets[k]], c->out_dt[k], want, n, &c->rtol[k], &c->atol[k]);
            free(want);
            c->rtol[k] *= 2, c->atol[k] *= 2;
        }
        finish_case(s, c);
    }
    gen_free(g);
    tc_set_flag("TC_NOOPT", noopt);
    tc_set_flag("TC_NOFUSE", nofuse);
}

/* ---- the MNIST convnet (examples/mnist.c, tinygrad's beautiful_mnist) ---------- */

/* the convnet of examples/convnet.h, seed 42, Adam lr 1e-3 */
static void mnist_init(convnet *m) {
    if (!convnet_init(m, 42, NULL, 0.001)) fail_msg("convnet: %s", tc_last_error());
    for (int k = 0; k < CONVNET_BUFFERS; k++) assert_non_null(m->bufs[k]);
}

/* logits (B,10) of x (B,1,28,28) uint8 */
static tc_tensor *mnist_forward(convnet *m, tc_tensor *x) {
    tc_tensor *h = convnet_forward(m->L, x);
    if (!h) fail_msg("convnet: %s", tc_last_error());
    return h;
}

/* a batch of made-up images and labels, different per step */
static void mnist_batch(int step, tc_tensor **x, tc_tensor **y) {
    uint8_t px[MNIST_B * 784];
    int32_t lb[MNIST_B];
    uint64_t r = 1000u + (uint64_t)step;
    for (int i = 0; i < MNIST_B * 784; i++) px[i] = (uint8_t)(mix(&r) >> 56);
    for (int i = 0; i < MNIST_B; i++) lb[i] = (int32_t)(mix(&r) % 10);
    *x = tc_from_data(px, TC_UINT8, 4, (int64_t[]){MNIST_B, 1, 28, 28}, NULL);
    *y = tc_from_data(lb, TC_INT32, 1, (int64_t[]){MNIST_B}, NULL);
    assert_true(*x && *y);
}

/* inference (BatchNorm on its running statistics), two batches */
static void add_mnist_forward(suite *s, convnet *m) {
    for (int i = 0; i < 7; i++) assert_int_equal(tc_layer_set_training(m->L[i], false), TC_OK);
    bool was = tc_set_grad_enabled(false);
    xcase *c = NULL;
    for (int st = 0; st < 2; st++) {
        tc_tensor *x, *y;
        mnist_batch(st, &x, &y);
        tc_tensor *logits = mnist_forward(m, x);
        if (!c) c = add_case(s, "mnist_fwd", &logits, 1, &x, 1, 2);
        c->rtol[0] = 1e-4, c->atol[0] = 1e-3;
        record_inputs(c, st, &x);
        record_outputs(c, st, &logits);
        tc_release(x), tc_release(y), tc_release(logits);
    }
    finish_case(s, c);
    tc_set_grad_enabled(was);
    for (int i = 0; i < 7; i++) assert_int_equal(tc_layer_set_training(m->L[i], true), TC_OK);
}

/* the largest |x| of output k of step 0 (float32) */
static double out_max_abs(const xcase *c, int k) {
    size_t at = 0;
    for (int j = 0; j < k; j++) at += c->out_bytes[j];
    double m = 0;
    for (size_t i = 0; i < c->out_bytes[k] / 4; i++) {
        float v;
        memcpy(&v, c->want + at + 4 * i, 4);
        m = fmax(m, fabs((double)v));
    }
    return m;
}

/* Across compilers, Adam amplifies rounding: its first step moves every
 * parameter by lr times the sign of its gradient (m/sqrt(v) = g/|g|), so
 * where a gradient is near 0 another rounding may move it the other way,
 * and later steps drift apart (with this batch of 4, BatchNorm and random
 * labels: the loss differs by 1e-7 at step 1, 4e-6 at step 5, 6e-2 at step
 * 10 between gcc and clang). So the first step is compared whole (the
 * parameters within 2.5 lr, the rest within rounding), the losses of the
 * first five within 1e-3, the rest is printed; bit for bit, with the
 * library's flags, stays the check of all ten. A gradient that is a sum
 * of terms that cancel is off by rounding of the terms, not of itself, so
 * m and v are within 1e-4 of their largest element as well (TC_CPU_ISA=
 * sse2 sums in other orders than clang's build: 1e-6 off a 1.5e-4 m).
 * Called after step 0's outputs are recorded.
 * outs: the loss, (m, v, p) per parameter, b1^t, b2^t, running statistics. */
static void train_tolerances(xcase *c, int n_upd) {
    c->tight_steps = 1, c->loss_steps = 5, c->loss_rtol = 1e-3;
    c->rtol[0] = 1e-4, c->atol[0] = 0;
    for (int k = 1; k < c->n_out; k++) {
        bool is_upd = k <= n_upd - 2, is_param = is_upd && (k - 1) % 3 == 2;
        c->rtol[k] = is_param ? 0 : 4e-3;
        c->atol[k] = is_param ? 2.5e-3 : is_upd ? 1e-7 + 1e-4 * out_max_abs(c, k) : 1e-5;
    }
}

/* the Adam training step, TRAIN_STEPS times: the step exported before the
 * first, then the library's steps (the same graph each time); each step's
 * loss, parameters, Adam state and running statistics are compared */
static void add_mnist_train(suite *s, convnet *m) {
    xcase *c = NULL;
    for (int st = 0; st < TRAIN_STEPS; st++) {
        tc_tensor *x, *y, *outs[MAX_IO];
        mnist_batch(10 + st, &x, &y);
        assert_int_equal(tc_optimizer_zero_grad(m->opt), TC_OK);
        tc_tensor *logits = mnist_forward(m, x), *loss = tc_cross_entropy(logits, y);
        assert_non_null(loss);
        assert_int_equal(tc_backward(loss), TC_OK);
        outs[0] = loss;
        int n = tc_optimizer_schedule_step(m->opt, outs + 1, MAX_IO - 5);
        assert_true(n > 0 && n <= MAX_IO - 5);
        for (int k = 0; k < 4; k++) outs[1 + n + k] = m->bufs[k];
        tc_tensor *ins[2] = {x, y};
        if (!c) c = add_case(s, "mnist_step", outs, 1 + n + 4, ins, 2, TRAIN_STEPS);
        record_inputs(c, st, ins);
        record_outputs(c, st, outs);
        if (st == 0) train_tolerances(c, n);
        tc_release(x), tc_release(y), tc_release(logits), tc_release(loss);
    }
    finish_case(s, c);
}

/* ---- gather and scatter: an embedding's training step ----------------------------- */

/* step st's indices (rows of a 10-row table, repeats included so the
 * gradient's adds collide; one out of range, which reads 0 and adds
 * nowhere), columns and targets */
static void gather_batch(int st, tc_tensor **ids, tc_tensor **cols, tc_tensor **tgt) {
    int32_t id[6], col[12];
    float t[12];
    uint64_t r = 500u + (uint64_t)st;
    for (int i = 0; i < 6; i++) id[i] = (int32_t)(mix(&r) % 7); /* rows 0..6: repeats */
    id[5] = st % 2 ? 12 : id[5];                                /* out of range on odd steps */
    for (int i = 0; i < 12; i++) col[i] = (int32_t)(mix(&r) % 4);
    for (int i = 0; i < 12; i++) t[i] = (float)(mix(&r) % 1000) / 500.0f - 1.0f;
    *ids = tc_from_data(id, TC_INT32, 1, (int64_t[]){6}, NULL);
    *cols = tc_from_data(col, TC_INT32, 2, (int64_t[]){6, 2}, NULL);
    *tgt = tc_from_data(t, TC_FLOAT32, 2, (int64_t[]){6, 2}, NULL);
    assert_true(*ids && *cols && *tgt);
}

/* loss = mean((gather(W[ids], 1, cols) - tgt)^2) and an SGD step with
 * momentum on W, GATHER_STEPS times: the forward gathers (tc_index, then
 * tc_gather), the backward adds at the gathered places (SCATTER kernels,
 * is_scatter items), the update keeps W and its momentum as state */
enum { GATHER_STEPS = 5 };
static void add_gather_step(suite *s) {
    tc_manual_seed(7);
    tc_tensor *w = tc_randn(2, (int64_t[]){10, 4}, TC_FLOAT32, NULL);
    assert_non_null(w);
    assert_int_equal(tc_realize(&w, 1), TC_OK);
    tc_optimizer *opt = tc_sgd(&w, 1, 0.1, 0.9);
    assert_non_null(opt);
    xcase *c = NULL;
    for (int st = 0; st < GATHER_STEPS; st++) {
        tc_tensor *ids, *cols, *tgt, *outs[8];
        gather_batch(st, &ids, &cols, &tgt);
        assert_int_equal(tc_optimizer_zero_grad(opt), TC_OK);
        tc_tensor *e = tc_index(w, 0, ids), *g = e ? tc_gather(e, 1, cols) : NULL;
        tc_tensor *d = g ? tc_sub(g, tgt) : NULL, *sq = d ? tc_square(d) : NULL;
        tc_tensor *loss = sq ? tc_mean(sq, 0, NULL, false) : NULL;
        if (!loss) fail_msg("gather step: %s", tc_last_error());
        assert_int_equal(tc_backward(loss), TC_OK);
        outs[0] = loss;
        int n = tc_optimizer_schedule_step(opt, outs + 1, 7);
        assert_int_equal(n, 2); /* W and its momentum */
        tc_tensor *ins[3] = {ids, cols, tgt};
        if (!c) {
            c = add_case(s, "gather_step", outs, 1 + n, ins, 3, GATHER_STEPS);
            for (int k = 0; k <= n; k++) c->rtol[k] = 1e-4, c->atol[k] = 1e-5;
        }
        record_inputs(c, st, ins);
        record_outputs(c, st, outs);
        tc_release(ids), tc_release(cols), tc_release(tgt), tc_release(e), tc_release(g);
        tc_release(d), tc_release(sq), tc_release(loss);
    }
    finish_case(s, c);
    size_t n = 0; /* the step has kernels that add at indexed places, and they exported */
    char *src = (char *)get_file(s->dir, "gather_step.c", &n);
    assert_non_null(src);
    assert_non_null(strstr(src, ": S_"));
    free(src);
    tc_optimizer_free(opt);
    tc_release(w);
}

/* ---- an indexed store: a KV cache's rows ---------------------------------------------- */

/* KV_STEPS steps of cache.index_copy_(2, pos + 1, 2 * row) on a (1, 2, 8, 4)
 * cache (state of the export: an assign target), out = the cache summed over
 * positions; the index is computed in the store's kernel (lazy: not checked
 * on the host), and one step's (10) is outside the cache: it writes nothing */
enum { KV_STEPS = 6 };
static void add_kv_step(suite *s) {
    tc_tensor *z = tc_full(4, (int64_t[]){1, 2, 8, 4}, 0, TC_FLOAT32, NULL);
    tc_tensor *cache = z ? tc_contiguous(z) : NULL;
    assert_non_null(cache);
    assert_int_equal(tc_realize(&cache, 1), TC_OK);
    tc_tensor *one = tc_full(0, NULL, 1, TC_INT32, NULL), *two = tc_full(0, NULL, 2, TC_FLOAT32, NULL);
    xcase *c = NULL;
    const int32_t at[KV_STEPS] = {-1, 0, 4, 10, 6, 1};
    for (int st = 0; st < KV_STEPS; st++) {
        float r[8];
        uint64_t q = 900u + (uint64_t)st;
        for (int i = 0; i < 8; i++) r[i] = (float)(mix(&q) % 1000) / 500.0f - 1.0f;
        tc_tensor *row = tc_from_data(r, TC_FLOAT32, 4, (int64_t[]){1, 2, 1, 4}, NULL);
        tc_tensor *pos = tc_from_data(&at[st], TC_INT32, 1, (int64_t[]){1}, NULL);
        tc_tensor *p1 = tc_add(pos, one), *r2 = tc_mul(row, two);
        assert_int_equal(tc_index_copy(cache, 2, p1, r2), TC_OK);
        int ax = 2;
        tc_tensor *sum = tc_sum(cache, 1, &ax, false), *outs[2] = {sum, cache}, *ins[2] = {row, pos};
        assert_non_null(sum);
        if (!c) c = add_case(s, "kv_step", outs, 2, ins, 2, KV_STEPS);
        record_inputs(c, st, ins);
        record_outputs(c, st, outs);
        tc_release(row), tc_release(pos), tc_release(p1), tc_release(r2), tc_release(sum);
    }
    finish_case(s, c);
    size_t n = 0; /* the step has a kernel that writes at indexed places, and it exported */
    char *src = (char *)get_file(s->dir, "kv_step.c", &n);
    assert_non_null(src);
    assert_non_null(strstr(src, ": P_"));
    free(src);
    tc_release(z), tc_release(cache), tc_release(one), tc_release(two);
}

/* ---- the tests ------------------------------------------------------------------------ */

static int teardown(void **state) {
    (void)state;
    tc_shutdown();
    return 0;
}

/* DIFF_PER_FAMILY cases of every family of the differential suite, the
 * embedding's training step (gather and scatter kernels) and a KV cache's
 * row stores (an indexed store) */
static void test_diff_graphs(void **state) {
    (void)state;
    static suite s;
    memset(&s, 0, sizeof s);
    make_dir(s.dir, sizeof s.dir);
    for (int fam = 0; fam < FAM_COUNT; fam++)
        for (int i = 0; i < DIFF_PER_FAMILY; i++) add_diff_case(&s, (family)fam, i);
    fprintf(stderr, "  %d differential cases exported\n", s.n);
    add_gather_step(&s); /* built with them: one set of builds */
    add_kv_step(&s);
    check_builds(&s, true);
    suite_free(&s);
}

/* the MNIST convnet: inference, then its training step 10 times */
static void test_mnist(void **state) {
    (void)state;
    static suite s;
    memset(&s, 0, sizeof s);
    make_dir(s.dir, sizeof s.dir);
    convnet m;
    mnist_init(&m);
    add_mnist_forward(&s, &m);
    add_mnist_train(&s, &m);
    convnet_free(&m);
    check_builds(&s, false);
    suite_free(&s);
}

/* bad calls: each a clear error naming tc_export_c and the values, and no file */
static void test_errors(void **state) {
    (void)state;
    char dir[256];
    make_dir(dir, sizeof dir);
    float d[6] = {1, 2, 3, 4, 5, 6};
    tc_tensor *x = tc_from_data(d, TC_FLOAT32, 2, (int64_t[]){2, 3}, NULL);
    tc_tensor *y = tc_mul(x, x), *part = tc_shrink(x, (int64_t[]){0, 1, 0, 3});
    tc_tensor *p = tc_from_data(d, TC_FLOAT32, 1, (int64_t[]){6}, NULL);
    assert_true(x && y && part && p);
    assert_int_equal(tc_export_c(dir, "9x", &y, 1, &x, 1), TC_ERR_INVALID);
    assert_tc_error(TC_ERR_INVALID, "tc_export_c: name '9x' is not a C identifier");
    assert_int_equal(tc_export_c(dir, "a-b", &y, 1, &x, 1), TC_ERR_INVALID);
    assert_int_equal(tc_export_c(dir, NULL, &y, 1, &x, 1), TC_ERR_INVALID);
    assert_int_equal(tc_export_c(NULL, "m", &y, 1, &x, 1), TC_ERR_INVALID);
    assert_tc_error(TC_ERR_INVALID, "dir is NULL");
    assert_int_equal(tc_export_c(dir, "m", &y, 0, &x, 1), TC_ERR_INVALID);
    assert_tc_error(TC_ERR_INVALID, "nothing to export");
    assert_int_equal(tc_export_c(dir, "m", &y, 1, &y, 1), TC_ERR_INVALID);
    assert_tc_error(TC_ERR_INVALID, "ins[0] (float32 (2,3)) is not realized");
    assert_int_equal(tc_export_c(dir, "m", &y, 1, &part, 1), TC_ERR_INVALID);
    assert_tc_error(TC_ERR_INVALID, "ins[0] (float32 (1,3)) is a view of part of a buffer");
    tc_tensor *twice[2] = {x, x};
    assert_int_equal(tc_export_c(dir, "m", &y, 1, twice, 2), TC_ERR_INVALID);
    assert_tc_error(TC_ERR_INVALID, "ins[0] and ins[1] are one buffer");
    char missing[300];
    snprintf(missing, sizeof missing, "%s/no/such/dir", dir);
    assert_int_equal(tc_export_c(missing, "m", &y, 1, &x, 1), TC_ERR_IO);
    assert_tc_error(TC_ERR_IO, "tc_export_c: cannot create");
    /* a graph on another device (NULL: scheduled and rendered as on the CPU,
     * never run): exported code runs on the host */
    tc_tensor *nx = tc_from_data(d, TC_FLOAT32, 2, (int64_t[]){2, 3}, "NULL");
    tc_tensor *ny = nx ? tc_mul(nx, nx) : NULL;
    assert_non_null(ny);
    assert_int_equal(tc_export_c(dir, "m", &ny, 1, &nx, 1), TC_ERR_DEVICE);
    assert_tc_error(TC_ERR_DEVICE, "tc_export_c: outs[0] is on NULL");
    assert_int_equal(tc_export_c(dir, "m", &y, 1, &nx, 1), TC_ERR_DEVICE);
    assert_tc_error(TC_ERR_DEVICE, "tc_export_c: ins[0] is on NULL");
    tc_release(nx), tc_release(ny);
    /* an input the graph assigns to: the assigned tensor must be state instead */
    tc_tensor *old = tc_reshape(p, 1, (int64_t[]){6}), *p2 = tc_mul(p, p);
    assert_true(old && p2);
    assert_int_equal(tc_assign(p, p2), TC_OK);
    assert_int_equal(tc_export_c(dir, "m", &p, 1, &old, 1), TC_ERR_INVALID);
    assert_tc_error(TC_ERR_INVALID, "the graph assigns to ins[0] (float32 (6,))");
    /* nothing was written */
    size_t n;
    assert_null(get_file(dir, "m.c", &n));
    assert_null(get_file(dir, "m.h", &n));
    tc_release(x), tc_release(y), tc_release(part), tc_release(p), tc_release(p2), tc_release(old);
    remove_dir(dir);
}

/* the driver of test_contract: return codes, a NULL output, state across
 * runs and reset; writes run<k>.bin for the three good runs */
static const char contract_main[] =
    "#include \"m.h\"\n#include <stdint.h>\n#include <stdio.h>\n#include <stdlib.h>\n"
    "static void put(const char *path, const float *y, const float *w) {\n"
    "  FILE *f = fopen(path, \"wb\");\n  fwrite(y, 4, 3, f);\n  fwrite(w, 4, 3, f);\n  "
    "fclose(f);\n}\n"
    "int main(void) {\n"
    "  static const float x[3] = {1, 1, 1};\n  float y[3], w[3];\n"
    "  const void *in[1] = {x}, *in_null[1] = {NULL};\n  void *out[2] = {y, w}, *skip[2] = {NULL, "
    "w};\n"
    "  char *arena = malloc(M_ARENA_BYTES + 8);\n  int bad = 0;\n"
    "  if (M_ARENA_BYTES == 0 || M_N_INPUTS != 1 || M_N_OUTPUTS != 2) bad |= 1;\n"
    "  if (M_INPUT0_BYTES != 12 || M_OUTPUT0_BYTES != 12 || M_OUTPUT1_BYTES != 12) bad |= 2;\n"
    "  if (m_run(NULL, in, out) != 1 || m_run(arena + 1, in, out) != 1) bad |= 4;\n"
    "  if (m_run(arena, NULL, out) != 2 || m_run(arena, in_null, out) != 2) bad |= 8;\n"
    "  if (m_run(arena, in, NULL) != 3) bad |= 16;\n"
    "  if (m_run(arena, in, out) != 0) bad |= 32;\n  put(\"run1.bin\", y, w);\n"
    "  y[0] = y[1] = y[2] = -1;\n"
    "  if (m_run(arena, in, skip) != 0 || y[0] != -1) bad |= 64;\n  put(\"run2.bin\", y, w);\n"
    "  m_reset();\n  if (m_run(arena, in, out) != 0) bad |= 128;\n  put(\"run3.bin\", y, w);\n"
    "  free(arena);\n  if (bad) printf(\"contract checks failed: %d\\n\", bad);\n  return "
    "bad;\n}\n";

/* the header's contract, its return codes, state and reset, built where
 * nothing of libtinyc is (no header, no library, a bare environment) */
static void test_contract(void **state) {
    (void)state;
    char dir[256];
    make_dir(dir, sizeof dir);
    const float wd[3] = {1, 2, 3}, cd[3] = {10, 20, 30}, xd[3] = {1, 1, 1};
    tc_tensor *w = tc_from_data(wd, TC_FLOAT32, 1, (int64_t[]){3}, NULL);
    tc_tensor *c = tc_from_data(cd, TC_FLOAT32, 1, (int64_t[]){3}, NULL);
    tc_tensor *x = tc_from_data(xd, TC_FLOAT32, 1, (int64_t[]){3}, NULL);
    assert_true(w && c && x);
    float want[2][6];
    for (int run = 0; run < 2; run++) { /* y = x*w + c with the old w, then w := 2w */
        tc_tensor *xw = tc_mul(x, w), *y = tc_add(xw, c),
                  *two = tc_full(0, NULL, 2, TC_FLOAT32, NULL);
        tc_tensor *w2 = tc_mul(w, two);
        assert_true(y && w2);
        assert_int_equal(tc_assign(w, w2), TC_OK);
        tc_tensor *outs[2] = {y, w};
        if (run == 0) assert_int_equal(tc_export_c(dir, "m", outs, 2, &x, 1), TC_OK);
        assert_int_equal(tc_realize(outs, 2), TC_OK);
        assert_int_equal(tc_to_host(y, want[run], 12), TC_OK);
        assert_int_equal(tc_to_host(w, want[run] + 3, 12), TC_OK);
        tc_release(xw), tc_release(y), tc_release(two), tc_release(w2);
    }
    size_t n = 0;
    char *h = (char *)get_file(dir, "m.h", &n), *src = (char *)get_file(dir, "m.c", &n);
    assert_true(h && src);
    assert_non_null(strstr(h, "#define M_ARENA_BYTES "));
    assert_non_null(
        strstr(h, "int m_run(void *arena, const void *const *inputs, void *const *outputs);"));
    assert_non_null(strstr(h, "void m_reset(void);"));
    assert_non_null(strstr(h, "extern void (*m_parallel_for)(m_task task, void *ctx, int64_t n);"));
    assert_non_null(strstr(h, "/* inputs[0]: float32 (3,) */"));
    assert_null(strstr(h, "tinyc.h")), assert_null(strstr(src, "tinyc.h"));
    free(h), free(src);
    put_file(dir, "main.c", contract_main, strlen(contract_main));
    assert_int_equal(sh(dir,
                        "env -i PATH=/usr/bin:/bin cc -std=c11 -O2 -Wall -Wextra -Werror "
                        "-o prog main.c m.c -lm",
                        "cc.log"),
                     0);
    assert_int_equal(sh(dir, "! ldd ./prog | grep -e tinyc -e ffi", "ldd.log"), 0);
    assert_int_equal(sh(dir, "env -i ./prog", "run.log"), 0);
    float got[3][6];
    for (int r = 0; r < 3; r++) {
        char name[16];
        snprintf(name, sizeof name, "run%d.bin", r + 1);
        unsigned char *b = get_file(dir, name, &n);
        assert_true(b && n == sizeof got[r]);
        memcpy(got[r], b, n);
        free(b);
    }
    assert_true(tc_allclose_f32(got[0], want[0], 6, 0, 0, "first run"));
    assert_true(tc_allclose_f32(got[1] + 3, want[1] + 3, 3, 0, 0, "second run's state"));
    assert_true(tc_allclose_f32(got[2], want[0], 6, 0, 0, "the run after reset"));
    tc_release(w), tc_release(c), tc_release(x);
    remove_dir(dir);
}

/* every allocation of an export fails in turn: TC_ERR_MEMORY, no file
 * written, nothing leaked, the graph unchanged (it exports and realizes
 * after); ASan's leak check covers the rest. (No assign in this graph: the
 * scheduler itself crashes in tc_hazard_protect_targets when an allocation
 * fails while it schedules one, tc_realize as much as tc_export_c.) */
static void test_out_of_memory(void **state) {
    (void)state;
    char dir[256];
    make_dir(dir, sizeof dir);
    const float wd[6] = {1, 2, 3, 4, 5, 6};
    tc_tensor *x = tc_from_data(wd, TC_FLOAT32, 2, (int64_t[]){2, 3}, NULL);
    tc_tensor *w = tc_from_data(wd, TC_FLOAT32, 1, (int64_t[]){3}, NULL);
    tc_tensor *xw = tc_mul(x, w), *y = tc_softmax(xw, 1), *z = tc_sum(xw, 0, NULL, false);
    assert_true(y && z);
    tc_tensor *outs[2] = {y, z};
    int64_t live = tc_graph_live_nodes();
    int n = 1;
    for (;; n++) {
        assert_true(n < 5000);
        tc_mem_fail_after(n);
        tc_status st = tc_export_c(dir, "m", outs, 2, &x, 1);
        tc_mem_fail_after(0);
        assert_int_equal(tc_graph_live_nodes(), live);
        if (st == TC_OK) break;
        if (st != TC_ERR_MEMORY) fail_msg("allocation %d: %s", n, tc_last_error());
        size_t len;
        assert_null(get_file(dir, "m.c", &len));
        assert_null(get_file(dir, "m.h", &len));
    }
    fprintf(stderr, "  an export of softmax and a sum: %d allocations made to fail\n", n - 1);
    assert_int_equal(tc_realize(outs, 2), TC_OK);
    tc_release(x), tc_release(w), tc_release(xw), tc_release(y), tc_release(z);
    remove_dir(dir);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_teardown(test_errors, teardown),
        cmocka_unit_test_teardown(test_contract, teardown),
        cmocka_unit_test_teardown(test_out_of_memory, teardown),
        cmocka_unit_test_teardown(test_diff_graphs, teardown),
        cmocka_unit_test_teardown(test_mnist, teardown),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
