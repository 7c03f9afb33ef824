/* adam_onestep.c - one Adam step of tinygrad's TinyBobNet, checked against
 * PyTorch (tinygrad's test/models/test_mnist.py TestMNIST.test_adam_onestep).
 *
 * TinyBobNet: out = relu(x @ l1) @ l2 with l1 (784,128) and l2 (128,10) from
 * scaled_uniform (U(-1,1)/sqrt(numel)); a batch of 69 rows of 784 pixel
 * values 0..255 (as float) with labels 0..9; loss = mean cross-entropy;
 * Adam(lr 0.001, b1 0.9, b2 0.999, eps 1e-8). Weights, pixels and labels
 * come from splitmix64 streams 4, 5, 6, 7 (tests/nn/gen_fixtures.py has the
 * same generator and wrote PyTorch's results to tests/nn/fixtures/bobnet.bin).
 *
 * The forward, the backward and the update are built lazily and realized in
 * one tc_realize (tc_optimizer_step_with the loss); the program prints how
 * many kernels that ran (tinygrad ran 26 for this step in mid-2024), then
 * compares the loss and the parameters after the step with PyTorch's: l2
 * whole, l1 by its row sums, column sums and every 25th element.
 *
 * Usage: adam_onestep [--fixtures PATH] [--device D]
 * Exit status: 0 when everything matches (1e-5; sums 1e-4), 1 otherwise. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <tinyc.h>

enum { IN = 784, HID = 128, OUT = 10, BS = 69, SAMPLE_EVERY = 25 };
#define N_SAMPLE ((IN * HID + SAMPLE_EVERY - 1) / SAMPLE_EVERY)

/* PyTorch's results, as gen_fixtures.py writes them */
typedef struct {
    double loss;               /* the loss before the step */
    float l2[HID * OUT];       /* l2 after the step */
    double l1_rows[IN];        /* row sums of l1 after the step */
    double l1_cols[HID];       /* column sums */
    float l1_sample[N_SAMPLE]; /* l1[0], l1[25], l1[50], ... (row-major) */
} fixture;

/* n uniform values in [0,1) from splitmix64 seeded with seed (24 bits each) */
static void splitmix64(uint64_t seed, double *out, int64_t n) {
    uint64_t x = seed;
    for (int64_t i = 0; i < n; i++) {
        uint64_t z = (x += 0x9E3779B97F4A7C15ULL);
        z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ULL;
        z = (z ^ (z >> 27)) * 0x94D049BB133111EBULL;
        z ^= z >> 31;
        out[i] = (double)(z >> 40) * 0x1p-24;
    }
}

static int fail(const char *what) {
    fprintf(stderr, "adam_onestep: %s failed: %s\n", what, tc_last_error());
    return 1;
}

static bool read_fixture(const char *path, fixture *fx) {
    FILE *f = fopen(path, "rb");
    if (!f) {
        fprintf(stderr, "adam_onestep: cannot open %s (run tests/nn/gen_fixtures.py)\n", path);
        return false;
    }
    bool ok = fread(&fx->loss, 8, 1, f) == 1 && fread(fx->l2, 4, HID * OUT, f) == HID * OUT &&
              fread(fx->l1_rows, 8, IN, f) == IN && fread(fx->l1_cols, 8, HID, f) == HID &&
              fread(fx->l1_sample, 4, N_SAMPLE, f) == N_SAMPLE;
    fclose(f);
    if (!ok) fprintf(stderr, "adam_onestep: %s is too short\n", path);
    return ok;
}

/* weights, pixels and labels from the generator; false on failure */
static bool make_inputs(const char *dev, tc_tensor **l1, tc_tensor **l2, tc_tensor **x,
                        tc_tensor **y) {
    static double u[IN * HID]; /* the largest stream (BS * IN is smaller) */
    static float w1[IN * HID], w2[HID * OUT], px[BS * IN];
    int32_t labels[BS];
    splitmix64(4, u, IN * HID);
    for (int i = 0; i < IN * HID; i++) w1[i] = (float)((u[i] * 2 - 1) * (1 / sqrt(IN * HID)));
    splitmix64(5, u, HID * OUT);
    for (int i = 0; i < HID * OUT; i++) w2[i] = (float)((u[i] * 2 - 1) * (1 / sqrt(HID * OUT)));
    splitmix64(6, u, BS * IN);
    for (int i = 0; i < BS * IN; i++) px[i] = (float)floor(u[i] * 256);
    splitmix64(7, u, BS);
    for (int i = 0; i < BS; i++) labels[i] = (int32_t)(u[i] * 10);
    *l1 = tc_from_data(w1, TC_FLOAT32, 2, (int64_t[]){IN, HID}, dev);
    *l2 = tc_from_data(w2, TC_FLOAT32, 2, (int64_t[]){HID, OUT}, dev);
    *x = tc_from_data(px, TC_FLOAT32, 2, (int64_t[]){BS, IN}, dev);
    *y = tc_from_data(labels, TC_INT32, 1, (int64_t[]){BS}, dev);
    return *l1 && *l2 && *x && *y;
}

/* max |got - want| over n values, also printed */
static double report(const char *what, const double *got, const double *want, int n) {
    double worst = 0;
    for (int i = 0; i < n; i++) worst = fmax(worst, fabs(got[i] - want[i]));
    printf("  %-22s max |diff| %.3g\n", what, worst);
    return worst;
}

/* compares l1 and l2 after the step with the fixture; true when they match */
static bool compare(const float *l1, const float *l2, const fixture *fx) {
    static double rows[IN], cols[HID], got[HID * OUT], want[HID * OUT];
    static double sg[N_SAMPLE], sw[N_SAMPLE];
    memset(rows, 0, sizeof rows);
    memset(cols, 0, sizeof cols);
    for (int i = 0; i < IN; i++)
        for (int j = 0; j < HID; j++) rows[i] += l1[i * HID + j], cols[j] += l1[i * HID + j];
    for (int i = 0; i < HID * OUT; i++) got[i] = l2[i], want[i] = fx->l2[i];
    for (int i = 0; i < N_SAMPLE; i++) sg[i] = l1[i * SAMPLE_EVERY], sw[i] = fx->l1_sample[i];
    bool ok = report("l2", got, want, HID * OUT) <= 1e-5;
    ok &= report("l1 row sums", rows, fx->l1_rows, IN) <= 1e-4;
    ok &= report("l1 column sums", cols, fx->l1_cols, HID) <= 1e-4;
    ok &= report("l1 every 25th element", sg, sw, N_SAMPLE) <= 1e-5;
    return ok;
}

/* the default fixture: tests/nn/fixtures/bobnet.bin next to this source's folder */
static void default_fixture(char *out, size_t cap) {
    const char *src = __FILE__, *slash = strrchr(src, '/');
    snprintf(out, cap, "%.*s../tests/nn/fixtures/bobnet.bin", slash ? (int)(slash - src + 1) : 0,
             src);
}

/* the step; *kernels gets the kernels it ran, *loss_value the loss */
static int run_step(tc_tensor *l1, tc_tensor *l2, tc_tensor *x, tc_tensor *y, int64_t *kernels,
                    float *loss_value) {
    tc_tensor *params[2] = {l1, l2};
    tc_optimizer *opt = tc_adam(params, 2, 0.001, 0.9, 0.999, 1e-8);
    if (!opt) return fail("tc_adam");
    int rc = 1;
    tc_tensor *h = NULL, *r = NULL, *out = NULL, *loss = NULL;
    if (!(h = tc_matmul(x, l1)) || !(r = tc_relu(h)) || !(out = tc_matmul(r, l2)) ||
        !(loss = tc_cross_entropy(out, y))) {
        rc = fail("building the forward pass");
        goto done;
    }
    if (tc_optimizer_zero_grad(opt) != TC_OK || tc_backward(loss) != TC_OK) {
        rc = fail("tc_backward");
        goto done;
    }
    tc_counters before, after;
    tc_get_counters(&before);
    if (tc_optimizer_step_with(opt, &loss, 1) != TC_OK) {
        rc = fail("tc_optimizer_step_with");
        goto done;
    }
    tc_get_counters(&after);
    *kernels = after.kernel_count - before.kernel_count;
    rc = tc_to_host(loss, loss_value, sizeof *loss_value) == TC_OK ? 0 : fail("tc_to_host");
done:
    tc_release(h), tc_release(r), tc_release(out), tc_release(loss);
    tc_optimizer_free(opt);
    return rc;
}

int main(int argc, char **argv) {
    char path[1024];
    const char *dev = NULL;
    default_fixture(path, sizeof path);
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "--fixtures") && i + 1 < argc)
            snprintf(path, sizeof path, "%s", argv[++i]);
        else if (!strcmp(argv[i], "--device") && i + 1 < argc) dev = argv[++i];
        else {
            fprintf(stderr, "usage: adam_onestep [--fixtures PATH] [--device D]\n");
            return 2;
        }
    }
    static fixture fx;
    static float l1v[IN * HID], l2v[HID * OUT];
    if (!read_fixture(path, &fx)) return 1;
    tc_tensor *l1 = NULL, *l2 = NULL, *x = NULL, *y = NULL;
    int64_t kernels = 0;
    float loss = 0;
    int rc = make_inputs(dev, &l1, &l2, &x, &y) ? 0 : fail("creating the inputs");
    if (rc == 0) rc = run_step(l1, l2, x, y, &kernels, &loss);
    if (rc == 0 &&
        (tc_to_host(l1, l1v, sizeof l1v) != TC_OK || tc_to_host(l2, l2v, sizeof l2v) != TC_OK))
        rc = fail("reading the parameters");
    if (rc == 0) {
        printf("TinyBobNet 784-128-10, batch %d, one Adam step\n", BS);
        printf("kernels in the step (forward + backward + Adam, one tc_realize): %lld "
               "(tinygrad mid-2024: 26)\n",
               (long long)kernels);
        printf("loss before the step: %.7f (PyTorch %.7f)\n", loss, fx.loss);
        bool ok = fabs(loss - fx.loss) <= 1e-5 * fmax(1, fabs(fx.loss)) && compare(l1v, l2v, &fx);
        printf("%s\n", ok ? "matches PyTorch" : "DOES NOT MATCH PyTorch");
        rc = ok ? 0 : 1;
    }
    tc_release(l1), tc_release(l2), tc_release(x), tc_release(y);
    tc_shutdown();
    return rc;
}
