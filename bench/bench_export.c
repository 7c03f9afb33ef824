/* bench_export.c - the library's side of bench/export.sh: exports the MNIST
 * convnet's Adam training step at batch B (DIR/bench_step.c) and its
 * inference at batch 1 (DIR/bench_infer.c) with tc_export_c, writes the
 * fixed batch (DIR/x.u8, DIR/y.i32; pixels and labels from an LCG, as
 * bench_train_step makes them), then times what the library itself does
 * with the same graphs: the step replayed by a tc_jit (two warm-up steps,
 * then N timed) and the batch-1 forward replayed by a tc_jit (10 warm-up
 * runs, then 20*N timed). bench/export_time.c times the exported files.
 * Prints "library_jit_step batch ms" and "library_jit_infer 1 ms" lines.
 * Usage: bench_export [--out DIR] [--batch B] [--steps N] */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <tinyc.h>

#include "../examples/convnet.h"

enum { MAX_OUTS = 64 };


static double now(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

static int fail(const char *what) {
    fprintf(stderr, "bench_export: %s failed: %s\n", what, tc_last_error());
    return 1;
}

static int build(convnet *m) {
    return convnet_init(m, 1, NULL, 1e-3) ? 0 : fail("building the convnet");
}

static tc_tensor *forward(convnet *m, tc_tensor *x) {
    return convnet_forward(m->L, x);
}

/* the step, lazily: outs[0] the loss, then the updates and running
 * statistics; returns how many, 0 on failure (*logits kept for release) */
static int lazy_step(convnet *m, tc_tensor *x, tc_tensor *y, tc_tensor **logits, tc_tensor **outs) {
    *logits = NULL;
    outs[0] = NULL;
    if (tc_optimizer_zero_grad(m->opt) != TC_OK || !(*logits = forward(m, x)) ||
        !(outs[0] = tc_cross_entropy(*logits, y)) || tc_backward(outs[0]) != TC_OK)
        return 0;
    int n = tc_optimizer_schedule_step(m->opt, outs + 1, MAX_OUTS - 5);
    if (n < 0 || n > MAX_OUTS - 5) return 0;
    for (int k = 0; k < 4; k++) outs[1 + n + k] = m->bufs[k];
    return 1 + n + 4;
}

static tc_status jit_step(void *user, tc_tensor *const *in, int n_in, tc_tensor **out, int n_out) {
    tc_tensor *logits, *outs[MAX_OUTS];
    (void)n_in, (void)n_out;
    int n = lazy_step(user, in[0], in[1], &logits, outs);
    tc_status s = n > 0 ? tc_realize(outs, n) : tc_last_status();
    tc_release(logits);
    out[0] = outs[0];
    return s;
}

static tc_status jit_infer(void *user, tc_tensor *const *in, int n_in, tc_tensor **out, int n_out) {
    (void)n_in, (void)n_out;
    out[0] = forward(user, in[0]);
    return out[0] ? TC_OK : tc_last_status();
}

/* ms per call of jit over in (warm-up calls untimed) */
static int time_jit(tc_jit *jit, tc_tensor **in, int n_in, int warm, int runs, double *ms) {
    double t0 = 0;
    for (int i = 0; i < warm + runs; i++) {
        if (i == warm) t0 = now();
        tc_tensor *out = NULL;
        float v[10];
        tc_status s = tc_jit_run(jit, in, n_in, &out, 1);
        if (s == TC_OK) s = tc_to_host(out, v, (size_t)tc_numel(out) * 4);
        tc_release(out);
        if (s != TC_OK) return fail("a jit run");
    }
    *ms = 1e3 * (now() - t0) / runs;
    return 0;
}

static int put(const char *dir, const char *name, const void *p, size_t n) {
    char path[4096];
    snprintf(path, sizeof path, "%s/%s", dir, name);
    FILE *f = fopen(path, "wb");
    bool ok = f && fwrite(p, 1, n, f) == n;
    if (f && fclose(f) != 0) ok = false;
    if (!ok) fprintf(stderr, "bench_export: cannot write %s\n", path);
    return ok ? 0 : 1;
}

/* the fixed batch of bench_train_step, also written to dir */
static int make_batch(const char *dir, int batch, tc_tensor **x, tc_tensor **y) {
    uint8_t *px = malloc((size_t)batch * 784);
    int32_t *lb = malloc(sizeof *lb * (size_t)batch);
    int rc = px && lb ? 0 : 1;
    uint64_t s = 12345;
    for (int i = 0; rc == 0 && i < batch * 784; i++)
        px[i] = (uint8_t)((s = s * 6364136223846793005ULL + 1) >> 56);
    for (int i = 0; rc == 0 && i < batch; i++)
        lb[i] = (int32_t)((s = s * 6364136223846793005ULL + 1) >> 60) % 10;
    if (rc == 0)
        rc = put(dir, "x.u8", px, (size_t)batch * 784) ||
             put(dir, "y.i32", lb, sizeof *lb * (size_t)batch);
    *x = rc ? NULL : tc_from_data(px, TC_UINT8, 4, (int64_t[]){batch, 1, 28, 28}, NULL);
    *y = rc ? NULL : tc_from_data(lb, TC_INT32, 1, (int64_t[]){batch}, NULL);
    free(px), free(lb);
    return rc ? rc : *x && *y ? 0 : fail("tc_from_data");
}

static int run(const char *dir, int batch, int steps) {
    convnet m = {0};
    tc_tensor *x = NULL, *y = NULL, *x1 = NULL, *logits = NULL, *outs[MAX_OUTS];
    tc_jit *js = NULL, *ji = NULL;
    int rc = build(&m);
    if (rc == 0) rc = make_batch(dir, batch, &x, &y);
    int n = rc == 0 ? lazy_step(&m, x, y, &logits, outs) : 0;
    if (rc == 0 && n == 0) rc = fail("building the step");
    tc_tensor *ins[2] = {x, y};
    if (rc == 0 && tc_export_c(dir, "bench_step", outs, n, ins, 2) != TC_OK)
        rc = fail("tc_export_c");
    if (rc == 0 && tc_realize(outs, n) != TC_OK) rc = fail("the first step");
    tc_release(logits);
    tc_release(n ? outs[0] : NULL);
    double step_ms = 0, infer_ms = 0;
    if (rc == 0 && !(js = tc_jit_new(jit_step, &m))) rc = fail("tc_jit_new");
    if (rc == 0) rc = time_jit(js, ins, 2, 2, steps, &step_ms);
    for (int i = 0; i < 7; i++) tc_layer_set_training(m.L[i], false);
    bool was = tc_set_grad_enabled(false);
    uint8_t img[784];
    for (int i = 0; i < 784; i++) img[i] = (uint8_t)(i * 37 % 251);
    if (rc == 0 && !(x1 = tc_from_data(img, TC_UINT8, 4, (int64_t[]){1, 1, 28, 28}, NULL)))
        rc = fail("tc_from_data");
    tc_tensor *l1 = rc == 0 ? forward(&m, x1) : NULL;
    if (rc == 0 && (!l1 || tc_export_c(dir, "bench_infer", &l1, 1, &x1, 1) != TC_OK))
        rc = fail("tc_export_c");
    tc_release(l1);
    if (rc == 0 && !(ji = tc_jit_new(jit_infer, &m))) rc = fail("tc_jit_new");
    if (rc == 0) rc = time_jit(ji, &x1, 1, 10, 20 * steps, &infer_ms);
    tc_set_grad_enabled(was);
    if (rc == 0)
        printf("library_jit_step %d %.2f\nlibrary_jit_infer 1 %.3f\n", batch, step_ms, infer_ms);
    tc_jit_free(js), tc_jit_free(ji);
    tc_release(x), tc_release(y), tc_release(x1);
    convnet_free(&m);
    return rc;
}

int main(int argc, char **argv) {
    const char *dir = ".";
    int batch = 512, steps = 10;
    for (int i = 1; i + 1 < argc; i += 2) {
        if (!strcmp(argv[i], "--out")) dir = argv[i + 1];
        else if (!strcmp(argv[i], "--batch")) batch = atoi(argv[i + 1]);
        else if (!strcmp(argv[i], "--steps")) steps = atoi(argv[i + 1]);
    }
    if (batch < 1 || steps < 1) {
        fprintf(stderr, "usage: bench_export [--out DIR] [--batch B] [--steps N]\n");
        return 2;
    }
    int rc = run(dir, batch, steps);
    tc_shutdown();
    return rc;
}
