/* bench_sdpa.c - causal scaled dot-product attention, forward and forward +
 * backward, at GPT-2 124M's head shape (B 4, 12 heads, 64 per head) and
 * sequence lengths T: the time of one replayed step (tc_jit) and the
 * kernels it launches. Row kernels on or off is TC_NOROWS (set it in the
 * environment, or --norows 0|1); run both and compare.
 *
 * Usage: bench_sdpa [--T 64,256,1024] [--reps N] [--mode fwd|bwd|both] [--norows 0|1]
 * Prints one line per (mode, T): "mode T kernels cpu_ms_min cpu_ms_median
 * wall_ms_min". cpu is the calling thread's CPU time (CLOCK_THREAD_CPUTIME_ID):
 * with TC_THREADS=1 every kernel runs on that thread, so it counts the
 * kernels' work and not the time the machine gave to others. fwd: o =
 * sdpa(q, k, v, causal); bwd: d q, d k, d v of sum(o * g) (the forward's
 * kernels included), q k v g (B, 12, T, 64). Two warm-up calls (compile,
 * capture) are not timed. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <tinyc.h>

enum { B = 4, H = 12, D = 64, MAX_REPS = 1000 };

static double clock_s(clockid_t id) {
    struct timespec ts;
    clock_gettime(id, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

static int fail(const char *what) {
    fprintf(stderr, "bench_sdpa: %s failed: %s\n", what, tc_last_error());
    return 1;
}

/* inputs q k v: o = sdpa(q, k, v, causal) */
static tc_status fwd_step(void *user, tc_tensor *const *in, int n_in, tc_tensor **out, int n_out) {
    (void)user, (void)n_in, (void)n_out;
    out[0] = tc_scaled_dot_product_attention(in[0], in[1], in[2], NULL, true);
    return out[0] ? TC_OK : TC_ERR_INVALID;
}

/* inputs q k v g: the gradients of sum(sdpa(q, k, v) * g) w.r.t. q, k, v */
static tc_status bwd_step(void *user, tc_tensor *const *in, int n_in, tc_tensor **out, int n_out) {
    (void)user, (void)n_in, (void)n_out;
    for (int i = 0; i < 3; i++)
        if (tc_set_requires_grad(in[i], true) != TC_OK) return TC_ERR_INVALID;
    tc_tensor *o = tc_scaled_dot_product_attention(in[0], in[1], in[2], NULL, true);
    tc_tensor *og = o ? tc_mul(o, in[3]) : NULL, *s = og ? tc_sum(og, 0, NULL, false) : NULL;
    tc_status st = s ? tc_backward(s) : TC_ERR_INVALID;
    for (int i = 0; i < 3; i++) {
        out[i] = st == TC_OK ? tc_grad(in[i]) : NULL;
        if (st == TC_OK && !out[i]) st = TC_ERR_INVALID;
        tc_zero_grad(in[i]);
        tc_set_requires_grad(in[i], false);
    }
    if (st == TC_OK) st = tc_realize(out, 3);
    tc_release(o), tc_release(og), tc_release(s);
    return st;
}

static int cmp_double(const void *a, const void *b) {
    double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

static int run(bool is_bwd, int64_t T, int reps) {
    int64_t shape[4] = {B, H, T, D};
    tc_tensor *in[4];
    for (int i = 0; i < 4; i++) in[i] = tc_randn(4, shape, TC_FLOAT32, NULL);
    tc_jit *jit = tc_jit_new(is_bwd ? bwd_step : fwd_step, NULL);
    int rc = jit ? 0 : fail("tc_jit_new");
    int n_in = is_bwd ? 4 : 3, n_out = is_bwd ? 3 : 1;
    for (int i = 0; i < 4 && rc == 0; i++)
        if (!in[i] || tc_realize(&in[i], 1) != TC_OK) rc = fail("the inputs");
    double cpu[MAX_REPS], wall_min = 1e30;
    for (int r = 0; r < reps + 2 && rc == 0; r++) {
        tc_tensor *out[3] = {NULL, NULL, NULL};
        float x;
        double c0 = clock_s(CLOCK_THREAD_CPUTIME_ID), w0 = clock_s(CLOCK_MONOTONIC);
        tc_status st = tc_jit_run(jit, in, n_in, out, n_out);
        if (st == TC_OK) st = tc_to_host(out[0], &x, sizeof x) == TC_OK ? TC_OK : st;
        double c1 = clock_s(CLOCK_THREAD_CPUTIME_ID), w1 = clock_s(CLOCK_MONOTONIC);
        for (int i = 0; i < n_out; i++) tc_release(out[i]);
        if (st != TC_OK) rc = fail("a step");
        if (r >= 2) {
            cpu[r - 2] = (c1 - c0) * 1e3;
            if ((w1 - w0) * 1e3 < wall_min) wall_min = (w1 - w0) * 1e3;
        }
    }
    if (rc == 0) {
        qsort(cpu, (size_t)reps, sizeof cpu[0], cmp_double);
        printf("%s %5lld %3d %10.3f %10.3f %10.3f\n", is_bwd ? "bwd" : "fwd", (long long)T,
               tc_jit_kernel_count(jit), cpu[0], cpu[reps / 2], wall_min);
        fflush(stdout);
    }
    tc_jit_free(jit);
    for (int i = 0; i < 4; i++) tc_release(in[i]);
    return rc;
}

int main(int argc, char **argv) {
    const char *ts = "64,256,1024", *mode = "both";
    int reps = 10;
    for (int i = 1; i + 1 < argc; i += 2) {
        if (!strcmp(argv[i], "--T")) ts = argv[i + 1];
        else if (!strcmp(argv[i], "--reps")) reps = atoi(argv[i + 1]);
        else if (!strcmp(argv[i], "--mode")) mode = argv[i + 1];
        else if (!strcmp(argv[i], "--norows")) {
            if (tc_set_flag("TC_NOROWS", atoi(argv[i + 1])) != TC_OK) return fail("TC_NOROWS");
        } else {
            fprintf(stderr, "usage: bench_sdpa [--T 64,256,1024] [--reps N] "
                            "[--mode fwd|bwd|both] [--norows 0|1]\n");
            return 2;
        }
    }
    if (reps < 1 || reps > MAX_REPS) reps = 10;
    int rc = 0;
    for (const char *p = ts; *p && rc == 0;) {
        int64_t T = strtoll(p, NULL, 10);
        if (T < 1) break;
        if (strcmp(mode, "bwd")) rc = run(false, T, reps);
        if (rc == 0 && strcmp(mode, "fwd")) rc = run(true, T, reps);
        p = strchr(p, ',');
        if (!p) break;
        p++;
    }
    tc_shutdown();
    return rc;
}
