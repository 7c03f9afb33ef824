/* bench_ops.c - libtinyc's side of the ops rows of bench/run.sh's table, and
 * the STREAM-style peer of the elementwise and sum rows (bench/stream.c,
 * built with the CPU runtime's compiler flags), measured interleaved.
 *
 * Every op runs as a one-op step replayed through tc_jit, so a figure is the
 * kernels' own time (the same buffers each call, no scheduling or
 * compiling); the first two runs (compile, capture) are not timed. Each
 * figure is the median of several runs (fewer for slow ones). The result
 * that is checked comes from one more replay, on inputs with new data: a
 * replay that returned a stale result would fail the check.
 *
 *   matmul N     (N,N)@(N,N) float32, N = 256, 512, 1024, 2048, 4096: GFLOPS = 2N^3/t
 *   skinny_n     (64,768) @ (768,50304): few rows, a wide output (a language
 *                model's head over 64 tokens, its weight stored (in, out))
 *   skinny_k     (128,50304) @ (50304,768): few rows, a long reduce (that
 *                head's input gradient, dlogits @ W): GFLOPS = 2mkn/t
 *   matmul_wt    x @ W.T with an (out, in) weight, the torch/GPT-2 layout:
 *                (256,256) @ (50304,256).T (a language model's head):
 *                GFLOPS = 2*256*256*50304/t
 *   matmul_tn    a.T @ b, a stored (k, m), (1024,1024) each (a weight
 *                gradient's layout: x.T @ dy): GFLOPS = 2N^3/t
 *   matmul_tt    a.T @ b.T, a stored (k, m), b (n, k), 1024 each
 *   matmul_heads attention's heads merged, then a projection, as GPT-2's
 *                c_proj reads them: y (4,12,64,64) = (B, heads, T, d),
 *                y.transpose(1,2).reshape(4,64,768) @ W.T, W (768,768):
 *                GFLOPS = 2*256*768*768/t
 *   machine      prints nothing: opens the device, so that with TC_DEBUG=1
 *                stderr says what the CPU device read of its host
 *                (bench/run.sh prints that line above its table)
 *   triad        d = a*b + c over 16M floats: GB/s = 16 bytes/element / t
 *   sum          sum of 16M floats: GB/s = 4 bytes/element / t
 *   softmax, layernorm, std over the rows of (4096,1024), softmax of
 *                (64,1024): ms
 *   transpose    (512,4608).T made contiguous (a 512x512x3x3 conv weight
 *                read channels-last): ms
 *
 * Usage: bench_ops [--only CASE] [--dump DIR] [--threads T] [--quick] [--device DEV]
 *   --only CASE  one case: matmul256, matmul512, matmul1024, matmul2048,
 *                matmul4096, skinny_n, skinny_k, matmul_wt, matmul_tn, matmul_tt, matmul_heads,
 *                stream (triad and sum), softmax, softmax64,
 *                layernorm, std, transpose or machine (default: all but machine;
 *                bench/run.sh runs them one by one, each next to its peer)
 *   --dump DIR   writes each case's inputs and our outputs as raw float32
 *                (DIR/<case>.<name>.f32) for bench/peers.py to check
 *                against numpy/PyTorch on the same data
 *   --threads T  the STREAM peer's threads (default: TC_THREADS, else the
 *                cores, as the CPU runtime does)
 *   --quick      fewer runs (a smoke test)
 *   --device DEV the device our side runs on (default: TC_DEVICE, else the
 *                CPU); every timed replay ends with tc_synchronize, so a GPU
 *                figure is the kernels' time, not their queueing (bench/gpu.sh)
 * Prints "ours <case> <value>" for our figures, "peer <case> <value>
 * <check>" for the STREAM peer (check: max abs difference from us, or the
 * relative difference of the sums, then "(ok)" or "(FAIL)") and "info
 * <text>" lines. Exit status 1
 * when a check fails or libtinyc reports an error. */
#include "stream.h"
#include "tinyc.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

enum { MAX_RUNS = 50 };

static const char *dump_dir; /* --dump, or NULL */
static const char *device;   /* --device, or NULL (TC_DEVICE, else the CPU) */
static bool quick;           /* --quick */
static int failures;         /* failed checks and errors */

static double now(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

static int cmp_double(const void *a, const void *b) {
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

static double median(double *v, int n) {
    qsort(v, (size_t)n, sizeof *v, cmp_double);
    return n % 2 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
}

/* runs for a case whose single run took `once` seconds: about `budget`
 * seconds in all, at least 3 (5 unless quick), at most MAX_RUNS */
static int runs_for(double once, double budget) {
    int lo = quick ? 3 : 5, hi = quick ? 5 : MAX_RUNS;
    int n = once > 0 ? (int)(budget / once) : hi;
    if (once > 1.0) lo = 3; /* the 2048 matmul while it is slow */
    return n < lo ? lo : n > hi ? hi : n;
}

static void error(const char *what) {
    fprintf(stderr, "bench_ops: %s: %s\n", what, tc_last_error());
    failures++;
}

/* n floats aligned to 64 bytes as the CPU runtime's buffers are (a vector
 * load of a misaligned array straddles two cache lines); free() them */
static float *floats(int64_t n) {
    size_t bytes = (sizeof(float) * (size_t)n + 63) / 64 * 64;
    return aligned_alloc(64, bytes ? bytes : 64);
}

/* x[i] = scale*sin(0.37*i + phase) + offset: deterministic, not periodic in
 * a way a cache or a branch predictor could exploit */
static void fill_into(float *x, int64_t n, double scale, double phase, double offset) {
    for (int64_t i = 0; i < n; i++) x[i] = (float)(scale * sin(0.37 * (double)i + phase) + offset);
}

static float *fill(int64_t n, double scale, double phase, double offset) {
    float *x = floats(n);
    if (x) fill_into(x, n, scale, phase, offset);
    return x;
}

static void dump(const char *name, const char *part, const float *x, int64_t n) {
    if (!dump_dir) return;
    char path[4096];
    snprintf(path, sizeof path, "%s/%s.%s.f32", dump_dir, name, part);
    FILE *f = fopen(path, "wb");
    if (!f || fwrite(x, sizeof *x, (size_t)n, f) != (size_t)n) {
        fprintf(stderr, "bench_ops: cannot write %s\n", path);
        failures++;
    }
    if (f) fclose(f);
}

/* ---- the one-op steps ------------------------------------------------------ */

typedef enum {
    OP_MATMUL,    /* a @ b */
    OP_MATMUL_WT, /* x @ w.T */
    OP_MATMUL_TN, /* a.T @ b */
    OP_MATMUL_TT, /* a.T @ b.T */
    OP_HEADS,     /* (B, H, T, d) -> (B, T, H * d), @ w.T */
    OP_TRIAD,     /* a*b + c */
    OP_SUM,       /* sum of all */
    OP_SOFTMAX,   /* over the last axis */
    OP_LAYERNORM, /* over the last axis */
    OP_STD,       /* over axis 1 */
    OP_TRANSPOSE  /* (rows, cols) -> (cols, rows), contiguous */
} op_kind;

static tc_status op_step(void *user, tc_tensor *const *in, int n_in, tc_tensor **out, int n_out) {
    (void)n_in, (void)n_out;
    op_kind op = *(const op_kind *)user;
    tc_tensor *y = NULL, *t = NULL, *u = NULL, *v = NULL;
    int ax = -1;
    switch (op) {
    case OP_MATMUL: y = tc_matmul(in[0], in[1]); break;
    case OP_MATMUL_WT: /* x @ w.T, w stored (out, in) */
        t = tc_transpose(in[1], 0, 1);
        y = t ? tc_matmul(in[0], t) : NULL;
        break;
    case OP_MATMUL_TN: /* a.T @ b, a stored (k, m) */
        t = tc_transpose(in[0], 0, 1);
        y = t ? tc_matmul(t, in[1]) : NULL;
        break;
    case OP_MATMUL_TT: /* a.T @ b.T, a stored (k, m), b (n, k) */
        t = tc_transpose(in[0], 0, 1);
        u = t ? tc_transpose(in[1], 0, 1) : NULL;
        y = u ? tc_matmul(t, u) : NULL;
        break;
    case OP_HEADS: {
        const int64_t *sh = tc_shape(in[0]);
        t = tc_transpose(in[0], 1, 2);
        u = t ? tc_reshape(t, 3, (int64_t[]){sh[0], sh[2], sh[1] * sh[3]}) : NULL;
        v = u ? tc_transpose(in[1], 0, 1) : NULL;
        y = v ? tc_matmul(u, v) : NULL;
        break;
    }
    case OP_TRIAD:
        t = tc_mul(in[0], in[1]);
        y = t ? tc_add(t, in[2]) : NULL;
        break;
    case OP_SUM: y = tc_sum(in[0], 0, NULL, false); break;
    case OP_SOFTMAX: y = tc_softmax(in[0], -1); break;
    case OP_LAYERNORM: y = tc_layernorm(in[0], -1, 1e-5); break;
    case OP_STD: y = tc_std(in[0], 1, &ax, false, 1); break;
    case OP_TRANSPOSE:
        t = tc_transpose(in[0], 0, 1);
        y = t ? tc_contiguous(t) : NULL;
        break;
    }
    tc_release(t), tc_release(u), tc_release(v);
    out[0] = y;
    return y ? TC_OK : tc_last_status();
}

/* one replay of j on in, waiting for the result; copies it to host when
 * `result` is given. Returns the seconds, or -1 on error. */
static double replay(tc_jit *j, tc_tensor **in, int n_in, float *result, size_t nbytes) {
    tc_tensor *y = NULL;
    double t0 = now();
    tc_status s = tc_jit_run(j, in, n_in, &y, 1);
    if (s == TC_OK) s = tc_synchronize(device);
    double dt = now() - t0;
    if (s == TC_OK && result) s = tc_to_host(y, result, nbytes);
    tc_release(y);
    return s == TC_OK ? dt : -1;
}

/* a prepared step: the jit after its compile and capture runs, and the time
 * of one replay */
typedef struct {
    op_kind op;
    tc_jit *jit;
    tc_tensor *in[3];
    int n_in;
    double once;
} step;

static int prepare(step *s) {
    s->jit = tc_jit_new(op_step, &s->op);
    if (!s->jit) return error("tc_jit_new"), -1;
    for (int i = 0; i < 2; i++) /* compile, capture */
        if (replay(s->jit, s->in, s->n_in, NULL, 0) < 0) return error("a warm-up run"), -1;
    s->once = replay(s->jit, s->in, s->n_in, NULL, 0);
    if (s->once < 0) return error("the first replay"), -1;
    return 0;
}

static void finish(step *s) {
    tc_jit_free(s->jit);
    for (int i = 0; i < s->n_in; i++) tc_release(s->in[i]);
}

/* median seconds of runs replays */
static double time_step(step *s, int runs) {
    double t[MAX_RUNS];
    for (int r = 0; r < runs; r++)
        if ((t[r] = replay(s->jit, s->in, s->n_in, NULL, 0)) < 0) return error("a replay"), -1;
    return median(t, runs);
}

static bool any_failed(const double *t, int runs) {
    for (int r = 0; r < runs; r++)
        if (t[r] < 0) return true;
    return false;
}

static tc_tensor *upload(const float *x, int ndim, const int64_t *shape) {
    tc_tensor *t = tc_from_data(x, TC_FLOAT32, ndim, shape, device);
    if (!t) error("tc_from_data");
    return t;
}

/* the checked run: one more replay, on inputs with new data (host[i], same
 * shapes, so the jit swaps their buffers in), its result in `result`. The
 * peer checks this one, so a replay that repeated an old result instead of
 * computing would fail the check. */
static int replay_on(step *s, float *const *host, float *result, size_t nbytes) {
    tc_tensor *in[3] = {NULL, NULL, NULL};
    int rc = 0;
    for (int i = 0; i < s->n_in && rc == 0; i++)
        if (!(in[i] = upload(host[i], tc_ndim(s->in[i]), tc_shape(s->in[i])))) rc = -1;
    if (rc == 0 && replay(s->jit, in, s->n_in, result, nbytes) < 0)
        rc = -1, error("a replay on new inputs");
    for (int i = 0; i < s->n_in; i++) tc_release(in[i]);
    return rc;
}

/* ---- cases ----------------------------------------------------------------- */

/* a two-input case `name`: inputs a (nda dims, sa) and b (ndb, sb) of op,
 * an output of out_n elements, flop operations a run: prints GFLOPS, then
 * dumps the inputs and the checked run's output (parts "a", "b", "out") */
static void bench_two(const char *name, op_kind op, int nda, const int64_t *sa, int ndb,
                      const int64_t *sb, double flop, int64_t out_n) {
    int64_t na = 1, nb = 1;
    for (int i = 0; i < nda; i++) na *= sa[i];
    for (int i = 0; i < ndb; i++) nb *= sb[i];
    float *a = fill(na, 1.0, 0.0, 0.0), *b = fill(nb, 1.0, 1.3, 0.0), *c = floats(out_n);
    step s = {.op = op, .n_in = 2};
    if (a && b && c && (s.in[0] = upload(a, nda, sa)) && (s.in[1] = upload(b, ndb, sb)) &&
        prepare(&s) == 0) {
        double t = time_step(&s, runs_for(s.once, quick ? 1.0 : 4.0));
        if (t > 0) printf("ours %s %.3f\n", name, flop / t * 1e-9);
        fill_into(a, na, 1.0, 0.5, 0.0), fill_into(b, nb, 1.0, 2.0, 0.0);
        if (replay_on(&s, (float *[]){a, b}, c, sizeof *c * (size_t)out_n) == 0)
            dump(name, "a", a, na), dump(name, "b", b, nb), dump(name, "out", c, out_n);
    }
    finish(&s);
    free(a), free(b), free(c);
    fflush(stdout);
}

/* a @ b of (m,k) and (k,n), as op reads them: a stored (m,k) or, for
 * OP_MATMUL_TN/TT, (k,m); b (k,n) or, for OP_MATMUL_WT/TT, (n,k); `name` is
 * the case */
static void bench_matmul(const char *name, int64_t m, int64_t k, int64_t n, op_kind op) {
    bool at = op == OP_MATMUL_TN || op == OP_MATMUL_TT, bt = op == OP_MATMUL_WT || op == OP_MATMUL_TT;
    int64_t sa[2] = {at ? k : m, at ? m : k}, sb[2] = {bt ? n : k, bt ? k : n};
    bench_two(name, op, 2, sa, 2, sb, 2.0 * (double)m * (double)k * (double)n, m * n);
}

/* matmul_heads: y (b, h, t, d) with its heads merged, @ w.T, w (h*d, h*d) */
static void bench_heads(const char *name, int64_t b, int64_t h, int64_t t, int64_t d) {
    int64_t c = h * d, sy[4] = {b, h, t, d}, sw[2] = {c, c};
    bench_two(name, OP_HEADS, 4, sy, 2, sw, 2.0 * (double)(b * t) * (double)c * (double)c,
              b * t * c);
}

/* triad and sum: ours and the STREAM loop alternate, run by run */
static void bench_stream(int64_t n, int threads) {
    int64_t shape[1] = {n};
    float *a = fill(n, 1.0, 0.0, 0.0), *b = fill(n, 1.0, 1.3, 0.0), *c = fill(n, 1.0, 2.1, 0.0);
    float *d = floats(n), *ours = floats(n);
    float *pos = fill(n, 0.5, 0.7, 1.0); /* for the sum: no cancellation, so relative error means something */
    step tr = {.op = OP_TRIAD, .n_in = 3}, su = {.op = OP_SUM, .n_in = 1};
    if (!a || !b || !c || !d || !ours || !pos) {
        fprintf(stderr, "bench_ops: out of memory\n");
        failures++;
    } else if ((tr.in[0] = upload(a, 1, shape)) && (tr.in[1] = upload(b, 1, shape)) &&
               (tr.in[2] = upload(c, 1, shape)) && prepare(&tr) == 0) {
        int runs = runs_for(tr.once, quick ? 0.5 : 2.0);
        double t_ours[MAX_RUNS], t_peer[MAX_RUNS];
        for (int r = 0; r < runs; r++) {
            t_ours[r] = replay(tr.jit, tr.in, 3, NULL, 0);
            double t0 = now();
            stream_triad(d, a, b, c, n, threads);
            t_peer[r] = now() - t0;
        }
        double bytes = 16.0 * (double)n, err = INFINITY;
        if (any_failed(t_ours, runs)) error("a triad replay");
        fill_into(a, n, 1.0, 0.4, 0.0), fill_into(b, n, 1.0, 1.9, 0.0), fill_into(c, n, 1.0, 2.8, 0.0);
        if (replay_on(&tr, (float *[]){a, b, c}, ours,
                      sizeof *ours * (size_t)n) == 0) {
            stream_triad(d, a, b, c, n, threads);
            err = 0;
            for (int64_t i = 0; i < n; i++) err = fmax(err, fabs((double)ours[i] - (double)d[i]));
        }
        printf("ours triad %.3f\n", bytes / median(t_ours, runs) * 1e-9);
        bool ok = err <= 1e-5;
        printf("peer triad %.3f maxabs=%.2g(%s)\n", bytes / median(t_peer, runs) * 1e-9, err, ok ? "ok" : "FAIL");
        if (!ok) fprintf(stderr, "bench_ops: triad differs from the C loop by %g\n", err), failures++;
    }
    fflush(stdout);
    if (pos && (su.in[0] = upload(pos, 1, shape))) {
        float s_ours = NAN;
        if (prepare(&su) == 0) {
            int runs = runs_for(su.once, quick ? 0.5 : 2.0);
            double t_ours[MAX_RUNS], t_peer[MAX_RUNS];
            volatile double sink = 0;
            for (int r = 0; r < runs; r++) {
                t_ours[r] = replay(su.jit, su.in, 1, NULL, 0);
                double t0 = now();
                sink += stream_sum(pos, n, threads);
                t_peer[r] = now() - t0;
            }
            if (any_failed(t_ours, runs)) error("a sum replay");
            fill_into(pos, n, 0.5, 2.9, 1.0);
            replay_on(&su, (float *[]){pos}, &s_ours, sizeof s_ours);
            double ref = 0, s_peer = stream_sum(pos, n, threads);
            for (int64_t i = 0; i < n; i++) ref += pos[i];
            double rel = fabs((double)s_ours - s_peer) / fabs(s_peer);
            printf("ours sum %.3f\n", 4.0 * (double)n / median(t_ours, runs) * 1e-9);
            bool ok = rel <= 1e-4; /* NaN (no result) fails */
            printf("peer sum %.3f relerr=%.2g(%s)\n", 4.0 * (double)n / median(t_peer, runs) * 1e-9, rel,
                   ok ? "ok" : "FAIL");
            printf("info sum: ours %.9g, C loop %.9g, double %.9g\n", (double)s_ours, s_peer, ref);
            if (!ok) fprintf(stderr, "bench_ops: the sums differ by %g (relative)\n", rel), failures++;
        }
    }
    finish(&tr), finish(&su);
    free(a), free(b), free(c), free(d), free(ours), free(pos);
    fflush(stdout);
}

/* a row op over (rows, cols): ms of ours; inputs and outputs dumped */
static void bench_rows(const char *name, op_kind op, int64_t rows, int64_t cols) {
    int64_t shape[2] = {rows, cols}, out_n = op == OP_STD ? rows : rows * cols;
    float *x = fill(rows * cols, 3.0, 0.0, 0.0), *y = floats(out_n);
    step s = {.op = op, .n_in = 1};
    if (x && y && (s.in[0] = upload(x, 2, shape)) && prepare(&s) == 0) {
        double t = time_step(&s, runs_for(s.once, quick ? 0.3 : 1.5));
        if (t > 0) printf("ours %s %.4f\n", name, t * 1e3);
        fill_into(x, rows * cols, 3.0, 0.9, 0.0);
        if (replay_on(&s, (float *[]){x}, y,
                      sizeof *y * (size_t)out_n) == 0)
            dump(name, "x", x, rows * cols), dump(name, "out", y, out_n);
    }
    finish(&s);
    free(x), free(y);
    fflush(stdout);
}

int main(int argc, char **argv) {
    const char *env = getenv("TC_THREADS");
    int threads = env && *env ? atoi(env) : (int)sysconf(_SC_NPROCESSORS_ONLN);
    const char *only = NULL;
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "--dump") && i + 1 < argc) dump_dir = argv[++i];
        else if (!strcmp(argv[i], "--only") && i + 1 < argc) only = argv[++i];
        else if (!strcmp(argv[i], "--threads") && i + 1 < argc) threads = atoi(argv[++i]);
        else if (!strcmp(argv[i], "--quick")) quick = true;
        else if (!strcmp(argv[i], "--device") && i + 1 < argc) device = argv[++i];
        else {
            fprintf(stderr, "usage: bench_ops [--only CASE] [--dump DIR] [--threads T] [--quick] [--device DEV]\n");
            return 2;
        }
    }
    if (threads < 1) threads = 1;
    static const char *const names[] = {"matmul256", "matmul512", "matmul1024", "matmul2048",
                                        "matmul_wt", "stream",    "softmax",    "softmax64",
                                        "layernorm", "std",       "matmul_heads", "transpose",
                                        "matmul4096", "skinny_n", "skinny_k", "matmul_tn", "matmul_tt",
                                        "machine"};
    int n_names = (int)(sizeof names / sizeof names[0]), found = 0;
    for (int c = 0; c < n_names; c++) {
        if (only ? strcmp(only, names[c]) != 0 : !strcmp(names[c], "machine")) continue;
        found++;
        switch (c) {
        case 0: bench_matmul(names[c], 256, 256, 256, OP_MATMUL); break;
        case 1: bench_matmul(names[c], 512, 512, 512, OP_MATMUL); break;
        case 2: bench_matmul(names[c], 1024, 1024, 1024, OP_MATMUL); break;
        case 3: bench_matmul(names[c], 2048, 2048, 2048, OP_MATMUL); break;
        case 4: bench_matmul(names[c], 256, 256, 50304, OP_MATMUL_WT); break;
        case 5:
            printf("info STREAM peer: %d thread(s), flags: %s\n", threads, stream_flags);
            bench_stream(16 << 20, threads);
            break;
        case 6: bench_rows("softmax", OP_SOFTMAX, 4096, 1024); break;
        case 7: bench_rows("softmax64", OP_SOFTMAX, 64, 1024); break;
        case 8: bench_rows("layernorm", OP_LAYERNORM, 4096, 1024); break;
        case 9: bench_rows("std", OP_STD, 4096, 1024); break;
        case 10: bench_heads(names[c], 4, 12, 64, 64); break;
        case 11: bench_rows("transpose", OP_TRANSPOSE, 512, 4608); break;
        case 12: bench_matmul(names[c], 4096, 4096, 4096, OP_MATMUL); break;
        case 13: bench_matmul(names[c], 64, 768, 50304, OP_MATMUL); break;
        case 14: bench_matmul(names[c], 128, 50304, 768, OP_MATMUL); break;
        case 15: bench_matmul(names[c], 1024, 1024, 1024, OP_MATMUL_TN); break;
        case 16: bench_matmul(names[c], 1024, 1024, 1024, OP_MATMUL_TT); break;
        default: { /* the device opens at its first tensor (TC_DEBUG=1 says what it read) */
            tc_tensor *z = tc_zeros(1, (int64_t[]){1}, TC_FLOAT32, device);
            if (!z) error("tc_zeros");
            tc_release(z);
        }
        }
    }
    if (!found) fprintf(stderr, "bench_ops: no case named %s\n", only), failures++;
    tc_shutdown();
    return failures ? 1 : 0;
}
