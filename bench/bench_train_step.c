/* bench_train_step.c - milliseconds per training step of the two MNIST
 * models of examples/mnist.c, and the kernels each step launches.
 *
 * conv: beautiful_mnist's convnet (Conv2d 1->32 5x5, 32->32 5x5, BN, pool,
 * 32->64 3x3, 64->64 3x3, BN, pool, Linear 576->10); mlp: Linear 784->128,
 * relu, Linear 128->10. One step = zero_grad, forward, cross-entropy,
 * backward, Adam update (with the loss and BatchNorm's running statistics
 * realized in the same tc_realize), replayed through a tc_jit unless --jit 0.
 * The batch is fixed (pixels from a generator): only compute is timed. Two
 * warm-up steps (compile, capture) are not timed.
 *
 * Usage: bench_train_step [--model conv|mlp|both] [--batch B] [--steps N] [--jit 0|1]
 *                         [--dump DIR] [--compile 1] [--device DEV]
 * Prints one line per model: "model batch ms_per_step kernels_per_step peak_mb".
 * --dump DIR writes, per model, the initial parameters (DIR/<model>.init.
 * safetensors, tc_nn_save), the batch (DIR/<model>.x.u8, DIR/<model>.y.i32)
 * and the loss of every step, warm-up included (DIR/<model>.loss.txt), so
 * bench/train_step_torch.py --load DIR can run the same steps and compare.
 * The last column is the peak device memory during the timed steps (MB).
 * --compile 1 runs steps eagerly (no jit) instead and says where the time of
 * the first one (schedule, lower+render, compile or load from TC_CACHEDIR,
 * launch) and of a later one goes, from tc_counters: one line per model,
 * "model batch=B kernels=K first_wall_ms=.. first_schedule_ms=..
 * first_lower_ms=.. first_compile_ms=.. first_launch_ms=.. first_other_ms=..
 * first_built=N later_..." (other: wall minus the rest, i.e. building the
 * graph; built: kernels compiled from source).
 * --device DEV runs the model on DEV (default: TC_DEVICE, else the CPU); a
 * step ends when its loss reaches the host, so GPU steps are timed whole.
 * bench/run.sh and bench/train_step.sh run it next to PyTorch
 * (bench/train_step_torch.py). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <tinyc.h>

#include "../examples/convnet.h"

typedef struct {
    bool is_conv;
    tc_layer *layers[7];
    int n_layers;
    tc_optimizer *opt;
    tc_tensor *buffers[4]; /* BatchNorm running statistics (borrowed) */
    int n_buffers;
} model;

static double now(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

static int fail(const char *what) {
    fprintf(stderr, "bench_train_step: %s failed: %s\n", what, tc_last_error());
    return 1;
}

static const char *device; /* --device DEV, or NULL (TC_DEVICE, else the CPU) */

static int build(model *m, bool is_conv) {
    memset(m, 0, sizeof *m);
    m->is_conv = is_conv;
    tc_manual_seed(1);
    tc_layer **L = m->layers;
    if (is_conv) {
        if (!convnet_layers(L, device)) return fail("creating the layers");
        m->n_layers = CONVNET_LAYERS;
    } else {
        L[0] = tc_nn_linear(784, 128, true, device);
        L[1] = tc_nn_linear(128, 10, true, device);
        m->n_layers = 2;
    }
    for (int i = 0; i < m->n_layers; i++)
        if (!L[i]) return fail("creating the layers");
    tc_tensor *params[16];
    int n = tc_nn_parameters(L, m->n_layers, params, 16);
    m->n_buffers = tc_nn_buffers(L, m->n_layers, m->buffers, 4);
    m->opt = tc_adam(params, n, 1e-3, 0.9, 0.999, 1e-8);
    return m->opt ? 0 : fail("tc_adam");
}

static void free_model(model *m) {
    tc_optimizer_free(m->opt);
    for (int i = 0; i < m->n_layers; i++) tc_layer_free(m->layers[i]);
}

static tc_tensor *forward(model *m, tc_tensor *x) {
    tc_layer **L = m->layers;
    if (m->is_conv) return convnet_forward(L, x);
    tc_tensor *h = tc_cast(x, TC_FLOAT32);
    bool ok = h && convnet_then(&h, tc_reshape(h, 2, (int64_t[]){tc_shape(x)[0], 784})) &&
              convnet_then(&h, tc_layer_forward(L[0], h)) && convnet_then(&h, tc_relu(h)) &&
              convnet_then(&h, tc_layer_forward(L[1], h));
    return ok ? h : NULL;
}

static tc_status step(void *user, tc_tensor *const *in, int n_in, tc_tensor **out, int n_out) {
    model *m = user;
    (void)n_in, (void)n_out;
    tc_tensor *logits = NULL, *loss = NULL;
    tc_status s = tc_optimizer_zero_grad(m->opt);
    if (s == TC_OK && !(logits = forward(m, in[0]))) s = tc_last_status();
    if (s == TC_OK && !(loss = tc_cross_entropy(logits, in[1]))) s = tc_last_status();
    if (s == TC_OK) s = tc_backward_opts(loss, NULL, false); /* frees the graph, as torch does */
    tc_tensor *also[5] = {loss};
    for (int i = 0; i < m->n_buffers; i++) also[1 + i] = m->buffers[i];
    if (s == TC_OK) s = tc_optimizer_step_with(m->opt, also, 1 + m->n_buffers);
    tc_release(logits);
    if (s == TC_OK) out[0] = loss;
    else tc_release(loss);
    return s;
}

static const char *dump_dir; /* --dump DIR, or NULL */

/* DIR/<model>.<suffix>, opened for writing; NULL (and a message) on failure */
static FILE *dump_open(bool is_conv, const char *suffix) {
    char path[4096];
    snprintf(path, sizeof path, "%s/%s.%s", dump_dir, is_conv ? "conv" : "mlp", suffix);
    FILE *f = fopen(path, "wb");
    if (!f) fprintf(stderr, "bench_train_step: cannot write %s\n", path);
    return f;
}

static int dump_bytes(bool is_conv, const char *suffix, const void *p, size_t n) {
    FILE *f = dump_open(is_conv, suffix);
    bool ok = f && fwrite(p, 1, n, f) == n;
    if (f) ok = fclose(f) == 0 && ok;
    return ok ? 0 : 1;
}

/* a fixed batch: pixels and labels from an LCG */
static int make_batch(bool is_conv, int batch, tc_tensor **x, tc_tensor **y) {
    uint8_t *px = malloc((size_t)batch * 784);
    int32_t *lb = malloc(sizeof *lb * (size_t)batch);
    if (!px || !lb) return free(px), free(lb), fprintf(stderr, "bench_train_step: out of memory\n"), 1;
    uint64_t s = 12345;
    for (int i = 0; i < batch * 784; i++)
        px[i] = (uint8_t)((s = s * 6364136223846793005ULL + 1) >> 56);
    for (int i = 0; i < batch; i++)
        lb[i] = (int32_t)((s = s * 6364136223846793005ULL + 1) >> 60) % 10;
    int rc = 0;
    if (dump_dir)
        rc = dump_bytes(is_conv, "x.u8", px, (size_t)batch * 784) |
             dump_bytes(is_conv, "y.i32", lb, sizeof *lb * (size_t)batch);
    *x = tc_from_data(px, TC_UINT8, 4, (int64_t[]){batch, 1, 28, 28}, device);
    *y = tc_from_data(lb, TC_INT32, 1, (int64_t[]){batch}, device);
    free(px), free(lb);
    return rc ? rc : *x && *y ? 0 : fail("tc_from_data");
}

/* the initial parameters, for the PyTorch side to start from */
static int dump_model(model *m) {
    char path[4096];
    snprintf(path, sizeof path, "%s/%s.init.safetensors", dump_dir, m->is_conv ? "conv" : "mlp");
    return tc_nn_save(path, m->layers, m->n_layers) == TC_OK ? 0 : fail("tc_nn_save");
}

/* times `steps` steps after two warm-up steps; prints the result line */
static int bench(bool is_conv, int batch, int steps, bool use_jit) {
    model m;
    tc_tensor *x = NULL, *y = NULL;
    tc_jit *jit = NULL;
    FILE *losses = NULL;
    int rc = build(&m, is_conv);
    if (rc == 0) rc = make_batch(is_conv, batch, &x, &y);
    if (rc == 0 && dump_dir && (rc = dump_model(&m)) == 0 && !(losses = dump_open(is_conv, "loss.txt")))
        rc = 1;
    if (rc == 0 && use_jit && !(jit = tc_jit_new(step, &m))) rc = fail("tc_jit_new");
    double t0 = 0;
    int64_t k0 = 0;
    for (int i = 0; i < steps + 2 && rc == 0; i++) {
        if (i == 2) {
            tc_counters c;
            tc_reset_counters(); /* the peak from here on */
            tc_get_counters(&c);
            k0 = c.kernel_count;
            t0 = now();
        }
        tc_tensor *in[2] = {x, y}, *loss = NULL;
        float lv;
        tc_status s = jit ? tc_jit_run(jit, in, 2, &loss, 1) : step(&m, in, 2, &loss, 1);
        if (s == TC_OK) s = tc_to_host(loss, &lv, sizeof lv); /* waits for the step */
        if (s != TC_OK) rc = fail("the training step");
        else if (losses) fprintf(losses, "%.9g\n", (double)lv);
        tc_release(loss);
    }
    if (rc == 0) {
        tc_counters c;
        tc_get_counters(&c);
        printf("%-4s %5d %10.2f %6lld %8.1f\n", is_conv ? "conv" : "mlp", batch,
               1e3 * (now() - t0) / steps, (long long)((c.kernel_count - k0) / steps),
               (double)c.mem_peak / (1 << 20));
        fflush(stdout);
    }
    if (losses && fclose(losses) != 0) rc = 1;
    tc_jit_free(jit);
    tc_release(x), tc_release(y);
    free_model(&m);
    return rc;
}

/* one eager step: wall seconds and the counters' difference across it */
static int eager_step(model *m, tc_tensor *x, tc_tensor *y, double *wall, tc_counters *d) {
    tc_counters c0, c1;
    tc_get_counters(&c0);
    tc_tensor *in[2] = {x, y}, *loss = NULL;
    float lv;
    double t0 = now();
    tc_status s = step(m, in, 2, &loss, 1);
    if (s == TC_OK) s = tc_to_host(loss, &lv, sizeof lv);
    *wall = now() - t0;
    tc_get_counters(&c1);
    tc_release(loss);
    *d = (tc_counters){
        .kernel_count = c1.kernel_count - c0.kernel_count,
        .schedule_s = c1.schedule_s - c0.schedule_s,
        .lower_s = c1.lower_s - c0.lower_s,
        .compile_s = c1.compile_s - c0.compile_s,
        .launch_s = c1.launch_s - c0.launch_s,
        .compile_count = c1.compile_count - c0.compile_count,
    };
    return s == TC_OK ? 0 : fail("an eager training step");
}

/* "<prefix>_wall_ms=.. <prefix>_schedule_ms=.. ..." for one eager step;
 * other = wall minus the four (building the graph: forward, autograd,
 * optimizer; host copies) */
static void print_step(const char *prefix, double wall, const tc_counters *d) {
    double other = wall - d->schedule_s - d->lower_s - d->compile_s - d->launch_s;
    printf(" %s_wall_ms=%.3f %s_schedule_ms=%.3f %s_lower_ms=%.3f %s_compile_ms=%.3f %s_launch_ms=%.3f"
           " %s_other_ms=%.3f %s_built=%lld",
           prefix, wall * 1e3, prefix, d->schedule_s * 1e3, prefix, d->lower_s * 1e3, prefix,
           d->compile_s * 1e3, prefix, d->launch_s * 1e3, prefix, other * 1e3, prefix,
           (long long)d->compile_count);
}

/* --compile 1: where an eager step's time goes, first (compiles or loads
 * from TC_CACHEDIR) and later (the best of two) */
static int compile_cost(bool is_conv, int batch) {
    model m;
    tc_tensor *x = NULL, *y = NULL;
    int rc = build(&m, is_conv);
    if (rc == 0) rc = make_batch(is_conv, batch, &x, &y);
    double first_wall = 0, later_wall = 1e30;
    tc_counters first = {0}, later = {0};
    if (rc == 0) rc = eager_step(&m, x, y, &first_wall, &first);
    for (int i = 0; i < 2 && rc == 0; i++) {
        double wall;
        tc_counters d;
        rc = eager_step(&m, x, y, &wall, &d);
        if (rc == 0 && wall < later_wall) later_wall = wall, later = d;
    }
    if (rc == 0) {
        printf("%s batch=%d kernels=%lld", is_conv ? "conv" : "mlp", batch, (long long)later.kernel_count);
        print_step("first", first_wall, &first);
        print_step("later", later_wall, &later);
        printf("\n");
        fflush(stdout);
    }
    tc_release(x), tc_release(y);
    free_model(&m);
    return rc;
}

int main(int argc, char **argv) {
    const char *which = "both";
    int batch = -1, steps = -1;
    bool use_jit = true, compile = false;
    for (int i = 1; i + 1 < argc; i += 2) {
        if (!strcmp(argv[i], "--model")) which = argv[i + 1];
        else if (!strcmp(argv[i], "--batch")) batch = atoi(argv[i + 1]);
        else if (!strcmp(argv[i], "--steps")) steps = atoi(argv[i + 1]);
        else if (!strcmp(argv[i], "--jit")) use_jit = atoi(argv[i + 1]) != 0;
        else if (!strcmp(argv[i], "--dump")) dump_dir = argv[i + 1];
        else if (!strcmp(argv[i], "--compile")) compile = atoi(argv[i + 1]) != 0;
        else if (!strcmp(argv[i], "--device")) device = argv[i + 1];
        else argc = -1;
    }
    if (argc < 0 || argc % 2 == 0 ||
        (strcmp(which, "conv") && strcmp(which, "mlp") && strcmp(which, "both"))) {
        fprintf(stderr, "usage: bench_train_step [--model conv|mlp|both] [--batch B] "
                        "[--steps N] [--jit 0|1] [--dump DIR] [--compile 1] [--device DEV]\n");
        return 2;
    }
    if (!compile) printf("model batch ms_per_step kernels_per_step peak_mb\n");
    int rc = 0;
    if (strcmp(which, "mlp"))
        rc = compile ? compile_cost(true, batch > 0 ? batch : 512)
                     : bench(true, batch > 0 ? batch : 512, steps > 0 ? steps : 3, use_jit);
    if (rc == 0 && strcmp(which, "conv"))
        rc = compile ? compile_cost(false, batch > 0 ? batch : 128)
                     : bench(false, batch > 0 ? batch : 128, steps > 0 ? steps : 50, use_jit);
    tc_shutdown();
    return rc;
}
