/* main.c - an outside program built against an installed libtinyc (see
 * ../run.sh). It builds relu(x * w - 1).sum(axis=0) with broadcasting, reads
 * the result back with tc_to_host, checks it against plain C, and exits 0 only
 * when every value matches and everything was released. */
#include <stdio.h>

#include <tinyc.h>

#define ROWS 4
#define COLS 3

static float absf(float v) {
    return v < 0 ? -v : v;
}

static int fail(const char *what) {
    fprintf(stderr, "consumer: %s failed: %s\n", what, tc_last_error());
    return 1;
}

int main(void) {
    float x[ROWS * COLS];
    float w[COLS] = {0.5f, -1.0f, 2.0f};
    for (int i = 0; i < ROWS * COLS; i++) {
        x[i] = (float)(i - 5);
    }
    /* what libtinyc must compute: out[j] = sum_i max(x[i][j] * w[j] - 1, 0) */
    float want[COLS] = {0};
    for (int i = 0; i < ROWS; i++) {
        for (int j = 0; j < COLS; j++) {
            float v = x[i * COLS + j] * w[j] - 1.0f;
            want[j] += v > 0 ? v : 0;
        }
    }

    int64_t xshape[2] = {ROWS, COLS};
    int64_t wshape[1] = {COLS};
    int64_t one_shape[1] = {1};
    int axis = 0;
    int rc = 1;
    tc_tensor *tx = tc_from_data(x, TC_FLOAT32, 2, xshape, NULL);
    tc_tensor *tw = tc_from_data(w, TC_FLOAT32, 1, wshape, NULL);
    tc_tensor *one = tc_full(1, one_shape, 1.0, TC_FLOAT32, NULL);
    tc_tensor *xw = NULL, *shifted = NULL, *act = NULL, *out = NULL;
    if (!tx || !tw || !one) {
        fail("creating the inputs");
        goto done;
    }
    if (!(xw = tc_mul(tx, tw)) || !(shifted = tc_sub(xw, one)) || !(act = tc_relu(shifted)) ||
        !(out = tc_sum(act, 1, &axis, false))) {
        fail("building the graph");
        goto done;
    }
    if (tc_ndim(out) != 1 || tc_shape(out)[0] != COLS) {
        fprintf(stderr, "consumer: result has the wrong shape\n");
        goto done;
    }
    float got[COLS];
    if (tc_to_host(out, got, sizeof got) != TC_OK) {
        fail("tc_to_host");
        goto done;
    }
    rc = 0;
    for (int j = 0; j < COLS; j++) {
        printf("out[%d] = %g (want %g)\n", j, got[j], want[j]);
        if (absf(got[j] - want[j]) > 1e-5f * (1.0f + absf(want[j]))) {
            rc = 1;
        }
    }
    printf("consumer: libtinyc %s: %s\n", tc_version(), rc == 0 ? "ok" : "WRONG RESULT");

done:
    tc_release(out);
    tc_release(act);
    tc_release(shifted);
    tc_release(xw);
    tc_release(one);
    tc_release(tw);
    tc_release(tx);
    tc_shutdown();
    return rc;
}
